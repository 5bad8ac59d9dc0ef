// growtrace attach PID [-o FILE] [--duration SECONDS] [--no-wait] [--max-wait SECONDS]
// growtrace detach PID
//
// Starts and stops tracing a running process. gdb loads libgrowtrace.so into the process
// (dlopen, or glibc's __libc_dlopen_mode when dlopen cannot be named) and calls the library's
// growtrace_attach_start / growtrace_attach_stop (preload/intercept/attach.h). The trace is an ordinary
// .gtrace file that `growtrace analyze` reads.
//
// attach stays in the foreground until --duration elapses, Ctrl-C / SIGTERM, the process exits
// or someone runs `growtrace detach PID`; with --no-wait it returns once tracing started.
//
// This file is the verbs (options, the trace's name, waiting, the notes); attach/ holds the
// rest: ptrace_policy (may gdb attach at all), tracer_calls (the calls and what their answers
// mean), gdb_session (running gdb), gdb_script.py (what gdb runs in the process), gdb_output
// (reading what it printed), target_process (what /proc says).
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/core.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
#include <variant>

#include "attach/gdb_session.h"
#include "attach/ptrace_policy.h"
#include "attach/target_process.h"
#include "attach/tracer_calls.h"
#include "common.h"
#include "contracts/trace_names.h"
#include "paths.h"
#include "sampling_option.h"

namespace growtrace::cli {
namespace {

namespace fs = std::filesystem;

struct AttachOptions {
    int pid = 0;
    std::string output;
    double duration = 0;
    bool no_wait = false;
    int max_wait = kWaitSeconds;
    SamplingOption sampling;  // default: kDefaultAttachSampleBytes
};

std::string default_output(int pid) {
    std::string path = trace_names::attached(pid);
    for (int n = 2; fs::exists(path); ++n) path = trace_names::attached(pid, n);
    return make_absolute(path);
}

// The file is created by the traced process with O_EXCL: nothing may be there.
std::optional<std::string> prepare_output(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) {
        if (!S_ISREG(st.st_mode)) return fmt::format("cannot write trace {}: not a regular file", path);
        if (unlink(path.c_str()) != 0) return fmt::format("cannot replace trace {}: {}", path, strerror(errno));
    }
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return fmt::format("cannot write trace {}: {}", path, strerror(errno));
    close(fd);
    unlink(path.c_str());
    return std::nullopt;
}

volatile sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int signo) { g_stop_signal = signo; }

int run_attach(const AttachOptions& o) {
    if (auto problem = check_target(o.pid, true)) return error(*problem);
    std::string library = preload_library_path();
    if (access(library.c_str(), R_OK) != 0) return error(fmt::format("tracer library not found: {}", library));
    std::string output = o.output.empty() ? default_output(o.pid) : make_absolute(o.output);
    if (auto problem = prepare_output(output)) return error(*problem);
    std::optional<uint64_t> sample_bytes = o.sampling.bytes(kDefaultAttachSampleBytes);
    if (!sample_bytes) return kExitError;

    // Signals that arrive while gdb works are honoured once tracing runs.
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);

    auto t0 = std::chrono::steady_clock::now();
    auto injected = inject(o.pid, library, output, *sample_bytes, o.max_wait);
    if (auto* why = std::get_if<std::string>(&injected)) return error(*why);
    Started started = std::get<Started>(injected);
    if (started.sites <= 0) return error(describe_start_failure(started, o.pid));
    double attach_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (started.waits > 0)
        note(fmt::format("process {} was inside its allocator: let it run until it left ({} time{})", o.pid,
                         started.waits, started.waits == 1 ? "" : "s"));
    note(fmt::format("attached to process {} ({}) in {:.1f} s, {} call sites redirected; tracing to {} ({})", o.pid,
                     process_name(o.pid), attach_s, started.sites, output,
                     *sample_bytes ? fmt::format("sampled, one every {} bytes on average", format_byte_size(*sample_bytes))
                                   : std::string("every allocation")));
    if (started.python > 0)
        note(fmt::format("CPython {}.{}: the agent (caches, classes) starts as soon as the program next runs Python code",
                         attach_status::python_major(started.python), attach_status::python_minor(started.python)));
    else if (started.python < 0)
        note(fmt::format("CPython, but the agent could not be started (code {}): native and Python stacks only",
                         started.python));
    if (o.no_wait && o.duration <= 0) {
        note(fmt::format("stop with: growtrace detach {}", o.pid));
        return 0;
    }
    note(o.duration > 0 ? fmt::format("tracing for {} s (Ctrl-C stops earlier)", o.duration)
                        : std::string("tracing until Ctrl-C (or growtrace detach PID)"));

    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.duration);
    int polls = 0;
    for (;;) {
        if (g_stop_signal) break;
        if (o.duration > 0 && std::chrono::steady_clock::now() >= deadline) break;
        if (!process_exists(o.pid)) {
            note(fmt::format("process {} exited; its trace is {}", o.pid, output));
            return 0;
        }
        if (++polls % 10 == 0 && !tracer_writing(o.pid)) {
            note(fmt::format("process {} was detached elsewhere; its trace is {}", o.pid, output));
            return 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    auto t1 = std::chrono::steady_clock::now();
    auto stopped = stop(o.pid);
    if (auto* why = std::get_if<std::string>(&stopped)) {
        if (!process_exists(o.pid)) {
            note(fmt::format("process {} exited; its trace is {}", o.pid, output));
            return 0;
        }
        return error(*why);
    }
    if (!wait_until_closed(o.pid))
        note(fmt::format("process {} has not handed over its GIL for {} s: the trace ends when it next runs Python "
                         "code", o.pid, kCloseTimeoutSeconds));
    double detach_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    note(fmt::format("detached from process {} in {:.1f} s; analyse with: growtrace analyze {}", o.pid, detach_s, output));
    return 0;
}

int run_detach(int pid) {
    if (auto problem = check_target(pid, false)) return error(*problem);
    auto t0 = std::chrono::steady_clock::now();
    auto stopped = stop(pid);
    if (auto* why = std::get_if<std::string>(&stopped)) return error(*why);
    const std::string trace = std::get<Stopped>(stopped).trace;
    if (!wait_until_closed(pid))
        note(fmt::format("process {} has not handed over its GIL for {} s: the trace ends when it next runs Python "
                         "code", pid, kCloseTimeoutSeconds));
    double detach_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (trace.empty()) note(fmt::format("detached from process {} in {:.1f} s", pid, detach_s));
    else
        note(fmt::format("detached from process {} in {:.1f} s; analyse with: growtrace analyze {}", pid, detach_s,
                         trace));
    return 0;
}

}  // namespace

Verb add_attach_verb(CLI::App& parent) {
    auto options = std::make_shared<AttachOptions>();
    CLI::App* app = parent.add_subcommand("attach", "Start tracing a running process (through gdb)");
    app->add_option("pid", options->pid, "Process id")->required();
    app->add_option("-o,--output", options->output, "Trace file (default growtrace.PID.attach.gtrace)");
    app->add_option("--duration", options->duration, "Detach after this many seconds")->check(CLI::PositiveNumber);
    app->add_flag("--no-wait", options->no_wait, "Return once tracing started; stop with 'growtrace detach PID'");
    app->add_option("--max-wait", options->max_wait,
                    fmt::format("Seconds the process may run on to leave its allocator, loader or stdio before "
                                "attach gives up (default {})",
                                kWaitSeconds))
        ->check(CLI::Range(1, 3600));
    add_sampling_options(app, options->sampling,
                         "Default: --sample " + format_byte_size(kDefaultAttachSampleBytes) +
                             " (a service traced for hours; --full for every allocation).");
    return {app, [options] { return run_attach(*options); }};
}

Verb add_detach_verb(CLI::App& parent) {
    auto pid = std::make_shared<int>(0);
    CLI::App* app = parent.add_subcommand("detach", "Stop tracing a process started with 'growtrace attach'");
    app->add_option("pid", *pid, "Process id")->required();
    return {app, [pid] { return run_detach(*pid); }};
}

}  // namespace growtrace::cli
