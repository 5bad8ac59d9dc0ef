#include "attach/gdb_session.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>

#include "attach/gdb_script_asset.h"
#include "common.h"
#include "contracts/environment.h"
#include "launcher.h"
#include "paths.h"

namespace growtrace::cli {

namespace {

std::string python_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') out += "\\n";
        else out += c;
    }
    return out + "\"";
}

// The embedded script, then the call of its entry point with the wait and the calls.
std::string gdb_script(const std::vector<GdbCall>& calls, int wait_seconds) {
    std::string list = "[";
    for (const GdbCall& call : calls) {
        list += "(" + python_string(call.name) + ", [";
        for (const std::string& e : call.expressions) list += python_string(e) + ", ";
        list += std::string("], ") + (call.required ? "True" : "False") + ", " +
                (call.after_failed.empty() ? std::string("None") : python_string(call.after_failed)) + "), ";
    }
    list += "]";
    return std::string(assets::kGdbScript) + fmt::format("_gt_main({}, {})\n", wait_seconds, list);
}

// gdb's environment: ours, with the xstate shim (tools/attach/gdb_xstate_shim.c) put first in
// LD_PRELOAD, before whatever it named. Only gdb gets it: the program attached to is already
// running, and gdb starts no other. ld.so splits LD_PRELOAD at spaces and colons, so a shim whose
// path holds one is left out (gdb then runs as it is), as is a shim that is not there.
std::vector<std::string> gdb_environment() {
    std::string shim = gdb_xstate_shim_path();
    bool usable = access(shim.c_str(), R_OK) == 0 && shim.find_first_of(" :") == std::string::npos;
    std::vector<std::string> env;
    bool preload_seen = false;
    for (char** e = environ; *e != nullptr; ++e) {
        std::string entry = *e;
        if (usable && entry.starts_with("LD_PRELOAD=")) {
            std::string others = entry.substr(std::strlen("LD_PRELOAD="));
            entry = "LD_PRELOAD=" + shim + (others.empty() ? "" : ":" + others);
            preload_seen = true;
        }
        env.push_back(std::move(entry));
    }
    if (usable && !preload_seen) env.push_back("LD_PRELOAD=" + shim);
    return env;
}

}  // namespace

std::string gdb_python_command(const std::vector<GdbCall>& calls, int wait_seconds) {
    return "python exec(" + python_string(gdb_script(calls, wait_seconds)) + ")";
}

// gdb runs in its own process group: a Ctrl-C meant for us must not interrupt an inferior call.
GdbResult run_gdb(int pid, const std::vector<GdbCall>& calls, const std::string& doing, int wait_seconds) {
    GdbResult result;
    result.wait_seconds = wait_seconds;
    std::vector<std::string> args = {"gdb", "-p", std::to_string(pid), "-batch", "-nx",
                                     "-iex", "set debuginfod enabled off", "-iex", "set auto-load off",
                                     "-iex", "set print thread-events off", "-ex", "set confirm off",
                                     "-ex", "set unwindonsignal on", "-ex", "handle all nostop noprint pass",
                                     // No symbols of what the calls load: gdb 13 puts internal
                                     // breakpoints into a library it has symbols of, and
                                     // crashes when a call unloads it (a failed attach does).
                                     "-ex", "set auto-solib-add off",
                                     "-ex", gdb_python_command(calls, wait_seconds), "-ex", "detach"};
    std::optional<std::string> gdb = find_in_path("gdb");
    std::vector<std::string> env = gdb_environment();
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int pipe_fds[2];
    if (!gdb || pipe2(pipe_fds, O_CLOEXEC) != 0) return result;
    pid_t child = fork();
    if (child < 0) return result;
    if (child == 0) {
        setpgid(0, 0);
        int null = open("/dev/null", O_RDONLY);
        dup2(null, 0);
        dup2(pipe_fds[1], 1);
        dup2(pipe_fds[1], 2);
        execve(gdb->c_str(), argv.data(), envp.data());
        _exit(127);
    }
    result.started = true;
    close(pipe_fds[1]);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kGdbTimeoutSeconds);
    std::string partial;
    std::set<std::string> announced;
    auto take_line = [&](const std::string& line) {
        std::optional<GdbReport::Wait> wait = result.take_line(line);
        if (wait && announced.insert(wait->function).second)
            note(fmt::format("process {}: thread {} is inside {} (allocator, loader or stdio), where {} cannot "
                             "run; letting it run until that call returns (at most {} s)",
                             pid, wait->thread, wait->function, doing, wait_seconds));
    };
    char chunk[4096];
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            if (!result.timed_out) {
                // Interrupting gdb stops the call it waits for; unwindonsignal undoes it and gdb
                // detaches. Killing gdb instead would leave the thread inside the call.
                result.timed_out = true;
                kill(child, SIGINT);
                deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kGdbGraceSeconds);
                continue;
            }
            result.killed = true;
            kill(-child, SIGKILL);
            break;
        }
        pollfd p{pipe_fds[0], POLLIN, 0};
        int ready = poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;
        ssize_t n = read(pipe_fds[0], chunk, sizeof chunk);
        if (n <= 0) break;
        result.output.append(chunk, static_cast<size_t>(n));
        partial.append(chunk, static_cast<size_t>(n));
        for (size_t end; (end = partial.find('\n')) != std::string::npos; partial.erase(0, end + 1))
            take_line(partial.substr(0, end));
    }
    if (!partial.empty()) take_line(partial);
    close(pipe_fds[0]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    // For a bug report: everything gdb said.
    if (const char* log = getenv(environment::kGdbLog); log && *log) {
        std::ofstream out(log, std::ios::app);
        out << "--- gdb -p " << pid << " (" << doing << ")\n" << result.output << "\n";
    }
    return result;
}

std::string gdb_trouble(const GdbResult& r, int pid) {
    if (!r.started) return "cannot run gdb";
    if (r.output.find("ptrace: Operation not permitted") != std::string::npos)
        return fmt::format("process {} may not be traced (ptrace: Operation not permitted); run as root or allow it "
                           "with 'sysctl kernel.yama.ptrace_scope=0'", pid);
    if (r.output.find("ptrace: No such process") != std::string::npos) return fmt::format("no such process: {}", pid);
    if (r.timed_out)
        return fmt::format("gdb's call of {} in process {} did not return within {} s: gdb interrupted it and put the "
                           "thread back where it was{}",
                           r.calling.empty() ? std::string("the tracer") : r.calling, pid, kGdbTimeoutSeconds,
                           r.killed ? ", but then had to be killed: the process may be left inside that call"
                                    : "; locks the call held may stay held, so the tracer in that process may not "
                                      "attach or detach again");
    if (r.failed_call == "registers") {
        std::string why = r.failure;
        while (!why.empty() && (why.back() == '.' || why.back() == ' ')) why.pop_back();
        return fmt::format("gdb cannot write the registers of process {} ({}), which it must do to call anything "
                           "there: nothing was called or loaded and the process runs on as it was",
                           pid, why);
    }
    if (!r.gave_up_in.empty())
        return fmt::format("process {} stayed inside {} for {} s, where the tracer's start-up cannot run (its only "
                           "thread, or all of them, waiting there); nothing was loaded and the process runs on as "
                           "it was: attach again when it is busy elsewhere",
                           pid, r.gave_up_in, r.wait_seconds);
    return "";
}

}  // namespace growtrace::cli
