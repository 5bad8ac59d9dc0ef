#include "preload/session/session.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "contracts/environment.h"
#include "contracts/trace_names.h"
#include "format/record_codec.h"
#include "format/records.h"
#include "preload/support/clock.h"
#include "preload/support/descriptors.h"
#include "preload/record/event_buffer.h"
#include "preload/support/log.h"
#include "preload/capture/module_map.h"
#include "preload/cpython/fork_check.h"
#include "preload/cpython/python_frames.h"
#include "preload/support/recursion_guard.h"
#include "preload/support/extension_points.h"
#include "preload/record/recorder.h"
#include "preload/record/sampler.h"
#include "preload/record/thread_registry.h"
#include "preload/support/process_stat.h"
#include "preload/support/tracer_thread.h"
#include "preload/capture/unwinder.h"
#include "preload/write/writer.h"

namespace growtrace::preload {

constinit TraceSession g_session;

namespace {

namespace records = format::records;
using format::Bytes;

// 2^22 slots: up to ~3 million distinct stack nodes; 64 MiB of address space, touched lazily.
constexpr unsigned kStackTreeLog2 = 22;

void set_state(TracerState state) { set_tracer_state(state); }

void reset_tree(SessionOrigin) { g_stack_tree.reset(); }

// Python frame ids belong to the trace; then the extension's own state (a forked child's
// agent announces its caches again).
void reset_python(SessionOrigin origin) {
    python::reset();
    extension().reset(origin);
}

void reset_module_map(SessionOrigin) { module_map_forget(); }

// Each part's reset for the next trace, in this order: threads hand their buffers back before
// the pool recycles its queue, and the writer, last, starts from nothing.
void (*const kParts[])(SessionOrigin) = {
    thread_registry_reset, pool_reset, reset_tree, reset_python, reset_module_map, writer_reset,
};

// --- fork: every lock a part may hold is taken before, and released in both processes after ---

// The writer thread left for this thread's fork (python/fork_check.h).
__thread bool t_writer_parked __attribute__((tls_model("initial-exec"))) = false;

int resume_writer(void*) {
    writer_resume();
    return 0;
}

void prepare_fork() {
    RecursionGuard guard;
    t_writer_parked = tracer_active() && python::fork_counts_threads() && caller_alone_with_tracer_threads() &&
                      writer_park_for_fork();
    writer_prepare_fork();
    thread_registry_prepare_fork();
    pool_prepare_fork();
    sampler_prepare_fork();
}

void parent_after_fork() {
    sampler_parent_after_fork();
    pool_parent_after_fork();
    thread_registry_parent_after_fork();
    writer_parent_after_fork();
    if (t_writer_parked && !python::run_when_back_in_python(resume_writer)) writer_resume();
    t_writer_parked = false;
}

// Only the forking thread exists in the child: each part is released, then the child's own
// trace begins.
void child_after_fork() {
    RecursionGuard guard;
    t_writer_parked = false;  // the child's trace starts its own writer
    sampler_child_after_fork();
    pool_child_after_fork();
    thread_registry_child_after_fork();
    writer_child_after_fork();
    g_session.begin(SessionOrigin::Forked);
}

// The process's command line, arguments separated by `separator`. Returns its length.
size_t read_cmdline(char* out, size_t size, char separator) {
    size_t n = 0;
    int fd = open_for_tracer("/proc/self/cmdline", O_RDONLY);
    if (fd >= 0) {
        ssize_t r = read(fd, out, size);
        n = r > 0 ? static_cast<size_t>(r) : 0;
        close(fd);
    }
    if (n && out[n - 1] == '\0') --n;
    for (size_t i = 0; i < n; ++i)
        if (out[i] == '\0') out[i] = separator;
    return n;
}

void configure_sampling(uint64_t sample_bytes) {
    if (!sampler_configure(sample_bytes))
        log_line("no memory for the table of sampled blocks; tracing every allocation instead");
}

}  // namespace

// What capturing stacks needs, once per process: the Python interpreter's symbols (if any),
// libunwind, the stack tree (laid out by parent; in huge pages for CPython's many nodes), the
// key whose destructor retires a thread's state, and the fork handlers.
bool TraceSession::init_capture() {
    if (capture_ready_) return true;
    python::prepare();
    // Nothing may be left pointing into the library should an attach then unload it.
    auto give_up = [] {
        python::release();
        return false;
    };
    if (!unwinder_init()) return give_up();
    if (!tree_ready_) tree_ready_ = g_stack_tree.init(kStackTreeLog2, {StackTree::Layout::ByParent, python::present()});
    if (!tree_ready_ || !thread_registry_init()) return give_up();
    if (!fork_handlers_) pthread_atfork(prepare_fork, parent_after_fork, child_after_fork);
    fork_handlers_ = true;
    capture_ready_ = true;
    return true;
}

// What would call into this library once it is unloaded: the thread key's destructor and
// libunwind's slots redirected to us (the fork handlers go with the library: dlclose
// unregisters them); and what it mapped or allocated that the process would keep for
// nothing: the stack tree, the event buffers, the tables of modules, the writer's buffers.
// Only after a first trace that never patched a call site: no thread of the program has
// entered the hooks, and the writer has ended.
void TraceSession::release_capture() {
    if (!capture_ready_) return;
    thread_registry_release();
    unwinder_release();
    g_stack_tree.release();
    tree_ready_ = false;
    python::release();
    pool_release();
    module_map_release();
    writer_release_memory();
    capture_ready_ = false;
}

void TraceSession::reset_parts(SessionOrigin origin) {
    for (auto reset : kParts) reset(origin);
}

// The configuration, and whether a trace is to be written at all.
bool TraceSession::prepare(SessionOrigin origin, const char* output, uint64_t sample_bytes) {
    switch (origin) {
    case SessionOrigin::Preloaded:
        config_ = read_config();
        extension().configure(config_);
        python::verify_stacks(config_.verify_stacks);
        configure_sampling(config_.sample_bytes);
        g_traced_pid.store(getpid());
        // With exec-following off, an exec'd image finds the first image's trace already there.
        return config_.follow_exec || access(config_.output, F_OK) != 0;
    case SessionOrigin::Attached:
        config_ = read_config();
        config_.sample_bytes = sample_bytes;  // the process's environment knows nothing of it
        configure_sampling(config_.sample_bytes);
        extension().configure(config_);
        snprintf(config_.output, sizeof config_.output, "%s", output);
        g_traced_pid.store(getpid());
        return true;
    case SessionOrigin::Forked:
        g_traced_pid.store(getpid());
        return tracer_active() && config_.follow_fork;
    }
    return false;
}

bool TraceSession::begin(SessionOrigin origin, const char* output, uint64_t sample_bytes) {
    RecursionGuard guard;
    if (origin == SessionOrigin::Attached && tracer_active()) return false;
    // The parent's trace, named in the child's Process record; the child never writes to it.
    char parent_trace[sizeof config_.output] = "";
    if (origin == SessionOrigin::Forked) {
        snprintf(parent_trace, sizeof parent_trace, "%s", file_.path());
        file_.abandon();
    } else if (origin == SessionOrigin::Preloaded) {
        const char* parent = getenv(environment::kParentTrace);
        if (parent) snprintf(parent_trace, sizeof parent_trace, "%s", parent);
    }
    // The images this one was launched through: only an image started by exec has any, and
    // what it spawns past the exec hooks (posix_spawn) must not inherit them.
    launchers_[0] = '\0';
    if (origin == SessionOrigin::Preloaded) {
        if (const char* launchers = getenv(environment::kLaunchers)) {
            snprintf(launchers_, sizeof launchers_, "%s", launchers);
            unsetenv(environment::kLaunchers);
        }
    }
    bool wanted = prepare(origin, output, sample_bytes);
    bool fresh = !capture_ready_;
    if (wanted && !init_capture()) wanted = false;
    if (!fresh) reset_parts(origin);
    auto file_origin = origin == SessionOrigin::Forked ? TraceFile::Origin::Forked : TraceFile::Origin::Started;
    if (!wanted || !file_.open(config_.output, file_origin)) {
        set_state(TracerState::Stopped);
        return false;
    }
    emit_process_record(parent_trace);
    if (!writer_start(&file_, config_.tick_ms)) {
        file_.close();
        set_state(TracerState::Stopped);
        return false;
    }
    set_state(TracerState::Active);
    return true;
}

void TraceSession::end() {
    int expected = static_cast<int>(TracerState::Active);
    if (!g_tracer_state.compare_exchange_strong(expected, static_cast<int>(TracerState::Stopped))) return;
    python::report_verification();
    writer_flush(true);
}

void TraceSession::emit_process_record(const char* parent_trace) {
    const char* exe = module_map_program_path();
    char cmdline[3072];
    size_t cmdline_size = read_cmdline(cmdline, sizeof cmdline, '\0');
    records::Process process;
    process.pid = static_cast<uint64_t>(getpid());
    process.ppid = static_cast<uint64_t>(getppid());
    process.start_ticks = now_ticks();
    process.start_monotonic_ns = monotonic_ns();
    process.start_realtime_ns = realtime_ns();
    process.exe = Bytes::of(exe);
    process.cmdline = Bytes(cmdline, cmdline_size);
    process.parent_trace = Bytes::of(parent_trace);
    process.launchers = Bytes::of(launchers_);
    process.has_launchers = true;
    format::RecordEncoder rec(records::Process::kKind);
    writer_emit(format::encode(rec, process));
    format::RecordEncoder sampling(records::Sampling::kKind);
    writer_emit(format::encode(sampling, records::Sampling{sample_period()}));
}

void TraceSession::forked_in_parent(int child_pid) {
    if (!tracer_active() || !config_.follow_fork) return;
    RecursionGuard guard;
    char path[sizeof config_.output];
    if (!trace_names::forked_child(config_.output, child_pid, 1, path, sizeof path)) path[0] = '\0';
    format::RecordEncoder rec(records::Fork::kKind);
    writer_emit(format::encode(rec, records::Fork{static_cast<uint64_t>(child_pid), Bytes::of(path)}));
}

void TraceSession::program_exiting() {
    if (!tracer_active()) return;
    RecursionGuard guard;
    uint64_t ticks = now_ticks();
    writer_note_exit(ticks);
    format::RecordEncoder rec(records::Exiting::kKind);
    writer_emit(format::encode(rec, records::Exiting{ticks}));
}

void TraceSession::ending_at_once() {
    // A vfork child shares our memory but not our trace: only the traced process ends it. A
    // signal handler that interrupted the tracer itself (which may hold its locks) ends nothing.
    if (!tracer_active() || getpid() != pid() || t_in_tracer) return;
    program_exiting();
    end();
}

bool TraceSession::before_exec() {
    // A vfork child shares our memory but not our file descriptors (the program may even have
    // closed them): it must not touch the tracer's state. Its exec'd image traces itself.
    if (!tracer_active()) return false;
    if (getpid() != pid()) return config_.follow_exec;
    RecursionGuard guard;
    name_next_image();
    format::RecordEncoder rec(records::Exec::kKind);
    writer_emit(format::encode(rec, records::Exec{Bytes::of(next_image_)}));
    // The image is about to be replaced: everything recorded so far must be on disk. If exec
    // fails, tracing simply goes on.
    writer_flush_before_exec();
    return config_.follow_exec;
}

// The next image's trace, the next in this one's exec chain that is free (trace_names.h), and
// the launchers it will name: this image's, then this image's command line (when it fits).
void TraceSession::name_next_image() {
    next_image_[0] = '\0';
    next_launchers_[0] = '\0';
    if (!config_.follow_exec) return;
    for (int step = 1; step < 1000; ++step) {
        if (!trace_names::next_exec_image(file_.path(), step, next_image_, sizeof next_image_)) {
            next_image_[0] = '\0';
            break;
        }
        if (access(next_image_, F_OK) != 0) break;
    }
    char cmdline[1024];
    size_t n = read_cmdline(cmdline, sizeof cmdline - 1, environment::kLauncherArgumentSeparator);
    size_t have = strlen(launchers_);
    if (have + 1 + n + 1 > sizeof next_launchers_) n = 0;  // too many: the chain is cut short
    size_t separator = have && n ? 1 : 0;
    memcpy(next_launchers_, launchers_, have);
    if (separator) next_launchers_[have] = environment::kLauncherSeparator[0];
    memcpy(next_launchers_ + have + separator, cmdline, n);
    next_launchers_[have + separator + n] = '\0';
}

bool TraceSession::spawned_image(char* out, size_t size) const {
    char child[sizeof config_.output];
    return trace_names::forked_child(file_.path(), static_cast<int>(getpid()), 1, child, sizeof child) &&
           trace_names::next_exec_image(child, 1, out, size);
}

void TraceSession::before_dlclose() {
    if (!tracer_active()) return;
    RecursionGuard guard;
    // Write down the library's address range while it is still mapped: its frames may stay in
    // live stacks after it is gone.
    module_map_scan(writer_emit, true);
}

}  // namespace growtrace::preload
