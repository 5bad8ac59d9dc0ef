// The trace session: one trace of this process from its begin to its end. It owns what a trace
// is made of: the configuration, the trace file and the stack tree, and it drives the writer
// (with its compactor), the thread registry and every other part that keeps state for the
// current trace. A trace begins in one of three ways, all through begin():
//
//   Preloaded  the library's constructor under `growtrace run`: the configuration is read
//              from the environment run prepared
//   Forked     the child of a traced process, in its fork handler: the parent's configuration,
//              a new file <stem>.<pid>.gtrace, and only the forking thread left
//   Attached   `growtrace attach` (preload/intercept/attach.cpp): the trace and sample size come from
//              the debugger's call, the rest from the process's environment
//
// Every part with state of its own for the current trace registers one reset (kParts in
// session.cpp) that begin() runs, in one order, for a forked child and for each attach; a
// forked child first releases the locks its fork handler took (the fork protocol), the same
// locks for every origin. So whatever way a trace began, it is made and traced the same way.
#pragma once

#include <cstdint>

#include "preload/support/config.h"
#include "preload/support/trace_state.h"
#include "preload/write/trace_file.h"

namespace growtrace::preload {

class TraceSession {
public:
    // Starts a trace. `output` and `sample_bytes` are an attach's (ignored otherwise). False
    // when no trace was started (Attached: also when one is running).
    bool begin(SessionOrigin origin, const char* output = nullptr, uint64_t sample_bytes = 0);
    // Flushes and closes the trace (End record). Safe to call when none runs.
    void end();
    // Whether stacks can be captured (done once per process, at the first begin).
    bool capture_ready() const { return capture_ready_; }
    // After an attach whose start failed, the first in this process: undoes what the first
    // begin set up that would call into the library once gdb unloads it (preload/intercept/attach.cpp).
    void release_capture();

    const Config& config() const { return config_; }
    // The traced process: differs from getpid() only in a vfork child.
    int pid() const { return g_traced_pid.load(std::memory_order_relaxed); }

    // What the program does that the trace records or must follow, called by the hooks.
    void forked_in_parent(int child_pid);
    // An Exiting record: main returned, exit() was called, or CPython's atexit ran; the
    // analyzer counts no more frees after it (shutdown is not the steady state).
    void program_exiting();
    // _exit() or _Exit(): the process ends with no destructor run; the trace ends here.
    void ending_at_once();
    // The trace so far is flushed. Returns whether the new image will be traced; if it is
    // (and this is the traced process, not a vfork child), next_image() names its trace and
    // next_launchers() the images before it, this one last (environment::kLaunchers).
    bool before_exec();
    const char* next_image() const { return next_image_; }
    // In a vfork child about to exec (pid() != getpid()), which must write nothing of the
    // parent's: the name its image's trace takes, <stem>.<child pid>.exec1.gtrace (the image of
    // a child, not the next of this process's chain). False if none fits.
    bool spawned_image(char* out, size_t size) const;
    const char* next_launchers() const { return next_launchers_; }
    void before_dlclose();

private:
    bool prepare(SessionOrigin origin, const char* output, uint64_t sample_bytes);
    void reset_parts(SessionOrigin origin);
    bool init_capture();
    void emit_process_record(const char* parent_trace);
    void name_next_image();

    static constexpr size_t kMaxLaunchers = 4096;  // environment::kLaunchers, without its name
    Config config_;
    TraceFile file_;
    char launchers_[kMaxLaunchers] = "";       // this image's, from its environment
    char next_image_[sizeof Config::output] = "";
    char next_launchers_[kMaxLaunchers] = "";
    bool capture_ready_ = false;  // once per process: libunwind, the tree, the thread key, atfork
    bool tree_ready_ = false;
    bool fork_handlers_ = false;
};

// Constant-initialised: the library constructor may run before this file's dynamic initialisers,
// which would then reset what begin() set.
extern constinit TraceSession g_session;

}  // namespace growtrace::preload
