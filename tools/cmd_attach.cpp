// growtrace attach PID [-o FILE] [--duration SECONDS] [--no-wait]
// growtrace detach PID
//
// Starts and stops tracing a running process. gdb loads libgrowtrace.so into the process
// (dlopen, or glibc's __libc_dlopen_mode when dlopen cannot be named) and calls the library's
// growtrace_attach_start / growtrace_attach_stop (preload/attach.h). The trace is an ordinary
// .gtrace file that `growtrace analyze` reads.
//
// attach stays in the foreground until --duration elapses, Ctrl-C / SIGTERM, the process exits
// or someone runs `growtrace detach PID`; with --no-wait it returns once tracing started.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <variant>

#include "common.h"
#include "paths.h"
#include "elf_check.h"
#include "launcher.h"
#include "sampling_option.h"

namespace growtrace::cli {
namespace {

namespace fs = std::filesystem;

// gdb normally needs well under 10 s; a process stopped inside its allocator's lock could make
// dlopen wait forever, which this bounds.
constexpr int kGdbTimeoutSeconds = 60;
// A CPython target finishes its trace when the tracer's thread gets the GIL: normally within
// milliseconds (the interpreter hands it over every 5 ms).
constexpr int kCloseTimeoutSeconds = 30;

struct AttachOptions {
    int pid = 0;
    std::string output;
    double duration = 0;
    bool no_wait = false;
    SamplingOption sampling;  // default: kDefaultAttachSampleBytes
};

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// A "Name:\tvalue" line of /proc/PID/status.
std::string status_field(int pid, const std::string& name) {
    std::ifstream in(fmt::format("/proc/{}/status", pid));
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, name.size() + 1, name + ":") == 0) {
            size_t start = line.find_first_not_of(" \t", name.size() + 1);
            return start == std::string::npos ? "" : line.substr(start);
        }
    }
    return "";
}

std::string status_field(int pid, const std::string& name);

// Alive: exists and is not a zombie waiting for its parent.
bool process_exists(int pid) {
    if (!(kill(pid, 0) == 0 || errno == EPERM)) return false;
    return status_field(pid, "State").compare(0, 1, "Z") != 0;
}

std::string process_name(int pid) {
    std::string comm = read_text(fmt::format("/proc/{}/comm", pid));
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    return comm;
}

// Every reason gdb could not (or should not) attach that can be told in advance. Empty if none.
std::optional<std::string> check_target(int pid, bool attaching) {
    if (pid <= 0 || !process_exists(pid) || !fs::exists(fmt::format("/proc/{}", pid)))
        return fmt::format("no such process: {}", pid);
    if (pid == getpid()) return std::string("cannot attach to growtrace itself");
    if (!find_in_path("gdb")) return std::string("gdb is needed to attach but is not on PATH (install gdb, e.g. apt-get install gdb)");

    bool root = geteuid() == 0;
    std::istringstream uids(status_field(pid, "Uid"));
    unsigned real_uid = 0, effective_uid = 0;
    uids >> real_uid >> effective_uid;
    if (!root && (real_uid != geteuid() || effective_uid != geteuid()))
        return fmt::format("process {} belongs to another user (uid {}); run growtrace as that user or as root", pid,
                           effective_uid);
    std::string scope_text = read_text("/proc/sys/kernel/yama/ptrace_scope");
    if (!scope_text.empty()) {
        int scope = atoi(scope_text.c_str());
        if (scope == 3)
            return fmt::format("process {} may not be traced: kernel.yama.ptrace_scope is 3 (ptrace disabled until "
                               "reboot)", pid);
        if (scope == 2 && !root)
            return fmt::format("process {} may not be traced: kernel.yama.ptrace_scope is 2 (only root may attach); run "
                               "as root or set it to 0 with 'sysctl kernel.yama.ptrace_scope=0'", pid);
        if (scope == 1 && !root)
            return fmt::format("process {} may not be traced: kernel.yama.ptrace_scope is 1 (only ancestors may "
                               "attach); run as root or set it to 0 with 'sysctl kernel.yama.ptrace_scope=0'", pid);
    }

    // gdb's calls have to run in the process: a stopped one would take the pending stop in the
    // middle of dlopen, and gdb's detach would set it running.
    std::string state = status_field(pid, "State");
    if (state.starts_with("T"))
        return fmt::format("process {} is stopped ({}: SIGSTOP, Ctrl-Z or a job control stop); the tracer has to run "
                           "in it to {}: continue it first (kill -CONT {}), then run this again",
                           pid, state, attaching ? "start" : "stop", pid);

    std::string tracer = status_field(pid, "TracerPid");
    if (!tracer.empty() && tracer != "0") {
        int tracer_pid = atoi(tracer.c_str());
        return fmt::format("process {} is already being traced by process {} ({}); a process has only one tracer",
                           pid, tracer_pid, process_name(tracer_pid));
    }

    if (attaching) {
        std::error_code ec;
        fs::path exe = fs::read_symlink(fmt::format("/proc/{}/exe", pid), ec);
        if (ec) return fmt::format("cannot inspect process {}: {}", pid, ec.message());
        ElfInfo info = inspect_elf(fmt::format("/proc/{}/exe", pid));
        if (info.linkage == Linkage::Static)
            return fmt::format("process {} runs a statically linked program ({}): there is no dynamic loader to load "
                               "the tracer into it", pid, exe.string());
        if (info.linkage == Linkage::Dynamic && !matches_own_architecture(info))
            return fmt::format("process {} runs a program for another architecture ({})", pid, exe.string());
    }
    return std::nullopt;
}

// What gdb does in the target is one Python script (kGdbScript): pick the thread the calls run
// on, then make the calls in order, printing a "growtrace-..." line for each step so that this
// side can say what is being waited for and what failed.
//
// The calls (dlopen, the tracer's entry points) allocate and take the loader's locks, so they
// run on a thread that is not inside the allocator, the dynamic loader, stdio, fork or the
// tracer itself. If every thread is inside one (a single-threaded program busy allocating, or
// blocked reading inside stdio), the first one is let run until its outermost such call returns
// and the threads are looked at again: running a call there instead would re-enter malloc
// half-way through its own work (glibc takes no lock in a single-threaded process) or unlock a
// stdio lock that was never taken (the first thread the tracer starts turns stdio's locking
// on). That wait is bounded (kWaitSeconds): past it, nothing is called and gdb detaches,
// leaving the process as it was.
//
// Signals: gdb passes every signal on at once (the program handles them as it would untraced),
// and a call interrupted all the same (a crash inside it, or our interrupt at the time limit)
// is unwound, so the thread never resumes inside a half-made call with gdb's return address.
constexpr int kWaitSeconds = 15;
constexpr const char* kGdbScript = R"gdb(
import gdb, os, signal, threading, time
def _gt_say(*words):
    print("growtrace-" + " ".join(str(w).replace("\n", " ") for w in words), flush=True)
def _gt_outermost_unsafe(thread):
    thread.switch()
    frame, depth, found = gdb.newest_frame(), 0, None
    while frame is not None and depth < 96:
        name = frame.name() or ""
        lib = gdb.solib_name(frame.pc()) or ""
        if ("alloc" in name or "free" in name or name.startswith(("_int_", "_dl_", "dl_", "__libc_dl", "_IO_"))
                or "fork" in name or "libgrowtrace" in lib or "/ld-linux" in lib):
            found = (depth, name or "??")
        frame, depth = frame.older(), depth + 1
    return found
def _gt_select(deadline):
    while True:
        threads = sorted(gdb.selected_inferior().threads(), key=lambda t: t.num)
        unsafe = [(t, _gt_outermost_unsafe(t)) for t in threads]
        safe = [t for t, f in unsafe if f is None]
        if safe:
            safe[0].switch()
            return True
        # Wait for a thread of the program's, not one of the tracer's (they never leave it).
        waitable = [(t, f) for t, f in unsafe if not (t.name or "").startswith("growtrace-")] or unsafe
        thread, (depth, name) = waitable[0]
        thread.switch()
        frame = gdb.newest_frame()
        for _ in range(depth):
            frame = frame.older()
        caller = frame.older()
        if caller is None or time.monotonic() >= deadline:
            _gt_say("gave-up", thread.num, name, len(threads))
            return False
        _gt_say("waiting", thread.num, name, len(threads))
        gdb.execute("tbreak *%d thread %d" % (caller.pc(), thread.num), to_string=True)
        timer = threading.Timer(max(0.05, deadline - time.monotonic()), lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        try:
            gdb.execute("continue", to_string=True)
        except gdb.error as e:
            _gt_say("continue-failed", e)
            return False
        finally:
            timer.cancel()
        gdb.execute("delete", to_string=True)
def _gt_call(name, expressions, required):
    for expression in expressions:
        _gt_say("calling", name)
        try:
            value = gdb.parse_and_eval(expression)
            if expression.startswith("(char*)"):
                _gt_say("text", name, value.string())
                return True
            value = int(value)
        except gdb.error as e:
            if "No symbol" in str(e) and expression is not expressions[-1]:
                continue
            _gt_say("failed", name, e)
            return False
        _gt_say("result", name, value)
        return value != 0 or not required
    return False
if _gt_select(time.monotonic() + GT_WAIT_SECONDS):
    for _gt_name, _gt_expressions, _gt_required in GT_CALLS:
        if not _gt_call(_gt_name, _gt_expressions, _gt_required):
            break
)gdb";

// A call for the script: its name, the expressions to try in turn (the next one only when gdb
// does not know a symbol of the previous), and whether a 0 result stops the calls after it.
// An expression cast to (char*) gives text, read from the process.
struct GdbCall {
    std::string name;
    std::vector<std::string> expressions;
    bool required = true;
};

std::string python_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') out += "\\n";
        else out += c;
    }
    return out + "\"";
}

std::string gdb_script(const std::vector<GdbCall>& calls) {
    std::string list = "[";
    for (const GdbCall& call : calls) {
        list += "(" + python_string(call.name) + ", [";
        for (const std::string& e : call.expressions) list += python_string(e) + ", ";
        list += std::string("], ") + (call.required ? "True" : "False") + "), ";
    }
    list += "]";
    std::string script = kGdbScript;
    script.replace(script.find("GT_WAIT_SECONDS"), 15, std::to_string(kWaitSeconds));
    script.replace(script.find("GT_CALLS"), 8, list);
    return script;
}

// `python exec("...")`: the script as one gdb command.
std::string gdb_python_command(const std::string& script) { return "python exec(" + python_string(script) + ")"; }

struct GdbResult {
    bool started = false;
    bool timed_out = false;    // past kGdbTimeoutSeconds: gdb was interrupted (the call unwound)
    bool killed = false;       // and did not detach on its own within kGdbGraceSeconds
    std::string output;        // stdout and stderr
    std::map<std::string, long> results;  // call name -> value
    std::map<std::string, std::string> texts;  // call name -> string, for "(char*)" calls
    std::string failed_call, failure;     // the call gdb refused or that failed, and why
    std::string calling;       // the last call started
    int waits = 0;             // times the program was let run out of its allocator
    std::string gave_up_in;    // the function a thread stayed in past kWaitSeconds
};

// Runs gdb in its own process group (a Ctrl-C meant for us must not interrupt an inferior call).
// `doing` names the job in the notes printed while the program is let run.
constexpr int kGdbGraceSeconds = 10;
GdbResult run_gdb(int pid, const std::vector<GdbCall>& calls, const std::string& doing) {
    GdbResult result;
    std::vector<std::string> args = {"gdb", "-p", std::to_string(pid), "-batch", "-nx",
                                     "-iex", "set debuginfod enabled off", "-iex", "set auto-load off",
                                     "-iex", "set print thread-events off", "-ex", "set confirm off",
                                     "-ex", "set unwindonsignal on", "-ex", "handle all nostop noprint pass",
                                     "-ex", gdb_python_command(gdb_script(calls)), "-ex", "detach"};
    std::optional<std::string> gdb = find_in_path("gdb");
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
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(gdb->c_str(), argv.data());
        _exit(127);
    }
    result.started = true;
    close(pipe_fds[1]);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kGdbTimeoutSeconds);
    std::string partial;
    std::set<std::string> announced;
    auto take_line = [&](const std::string& line) {
        std::istringstream words(line);
        std::string tag, name;
        words >> tag;
        if (tag == "growtrace-waiting" || tag == "growtrace-gave-up") {
            std::string thread, function;
            words >> thread >> function;
            if (tag == "growtrace-gave-up") {
                result.gave_up_in = function;
                return;
            }
            ++result.waits;
            if (announced.insert(function).second)
                note(fmt::format("process {}: thread {} is inside {} (allocator, loader or stdio), where {} cannot "
                                 "run; letting it run until that call returns (at most {} s)",
                                 pid, thread, function, doing, kWaitSeconds));
        } else if (tag == "growtrace-calling") {
            words >> result.calling;
        } else if (tag == "growtrace-result") {
            long value = 0;
            words >> name >> value;
            result.results[name] = value;
        } else if (tag == "growtrace-text") {
            words >> name;
            std::getline(words.ignore(1), result.texts[name]);
        } else if (tag == "growtrace-failed") {
            words >> result.failed_call;
            std::getline(words >> std::ws, result.failure);
        }
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
    // For a bug report: everything gdb said, appended to $GROWTRACE_GDB_LOG.
    if (const char* log = getenv("GROWTRACE_GDB_LOG"); log && *log) {
        std::ofstream out(log, std::ios::app);
        out << "--- gdb -p " << pid << " (" << doing << ")\n" << result.output << "\n";
    }
    return result;
}

// gdb's diagnostics, for an error message: the last line that is neither ours nor chatter.
std::string gdb_complaint(const GdbResult& r) {
    if (!r.failure.empty()) return r.failure;
    std::istringstream lines(r.output);
    std::string line, last;
    while (std::getline(lines, line)) {
        if (line.empty() || line[0] == '$' || line.starts_with("growtrace-") || line.find("[Inferior") == 0 ||
            line.find("[Thread") == 0 || line.find("[New ") == 0 || line.find("Using host libthread_db") == 0 ||
            line.find("0x") == 0)
            continue;
        last = line;
    }
    return last;
}

// Why gdb did not get through the calls, when it is not the calls' own answer. Empty if it did.
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
    if (!r.gave_up_in.empty())
        return fmt::format("process {} stayed inside {} for {} s, where the tracer's start-up cannot run (its only "
                           "thread, or all of them, waiting there); nothing was loaded and the process runs on as "
                           "it was: attach again when it is busy elsewhere",
                           pid, r.gave_up_in, kWaitSeconds);
    return "";
}

std::string c_string_literal(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

// Whether the tracer's writer thread ("growtrace-wr") runs in the process: from the start of
// an attach until its trace is complete. (The tracer keeps no descriptor open to look for.)
bool tracer_writing(int pid) {
    std::error_code ec;
    for (fs::directory_iterator it(fmt::format("/proc/{}/task", pid), ec), end; !ec && it != end; it.increment(ec))
        if (read_text((it->path() / "comm").string()) == "growtrace-wr\n") return true;
    return false;
}

std::string describe_start_failure(long rc, int pid) {
    switch (rc) {
        case -1: return fmt::format("process {} is already traced by growtrace (started with growtrace run, or attached)", pid);
        case -2: return fmt::format("process {} uses another allocator than libc's malloc (preloaded?); attaching would mix two heaps", pid);
        case -3: return fmt::format("the tracer could not start in process {} (its stderr says why)", pid);
        case -4: return fmt::format("no call to malloc & co found to redirect in process {}", pid);
        case -5: return fmt::format("the tracer library loaded into process {} cannot find its own hooks", pid);
        default: return fmt::format("the tracer in process {} failed to start (code {})", pid, rc);
    }
}

struct Started {
    long sites = 0;  // redirected call sites, or an error code of growtrace_attach_start
    long python = 0;  // growtrace_attach_python: 3XX agent starts in CPython 3.XX, 0 no CPython it reads, < 0 error
    int waits = 0;    // times gdb let the program run to get out of its allocator first
};

// Loads the library and starts tracing, and the CPython agent where there is one.
std::variant<Started, std::string> inject(int pid, const std::string& library, const std::string& output,
                                          uint64_t sample_bytes) {
    std::string agent = python_agent_dir(library);
    // dlopen is in libc since glibc 2.34; older processes that do not link libdl only have
    // glibc's internal __libc_dlopen_mode (flags RTLD_NOW | __RTLD_DLOPEN). The agent's paths
    // go before the start: gdb allocates them in the process, which must not be traced yet.
    std::vector<GdbCall> calls = {
        {"load",
         {fmt::format("(long)dlopen({}, 2)", c_string_literal(library)),
          fmt::format("(long)__libc_dlopen_mode({}, 0x80000002)", c_string_literal(library))}},
        {"python",
         {agent.empty() ? std::string("(int)0")
                        : fmt::format("(int)growtrace_attach_python({}, {})", c_string_literal(agent + "/startup"),
                                      c_string_literal(python_agent_extension(agent)))},
         false},
        {"start", {fmt::format("(int)growtrace_attach_start_sampled({}, {}ULL)", c_string_literal(output), sample_bytes)},
         false}};
    GdbResult r = run_gdb(pid, calls, "loading the tracer");
    if (std::string trouble = gdb_trouble(r, pid); !trouble.empty()) return trouble;
    if (r.results.contains("start"))
        return Started{r.results["start"], r.results.contains("python") ? r.results["python"] : -9, r.waits};
    if (r.results.contains("load") && r.results["load"] == 0)
        return fmt::format("the dynamic loader of process {} refused {}", pid, library);
    std::string complaint = gdb_complaint(r);
    return fmt::format("could not load the tracer into process {}: {}", pid, complaint.empty() ? "gdb failed" : complaint);
}

// Stops tracing. Returns the number of restored call sites and the trace, or an error.
struct Stopped {
    long sites = 0;
    std::string trace;
};
std::variant<Stopped, std::string> stop(int pid) {
    GdbResult r = run_gdb(pid, {{"trace", {"(char*)growtrace_attach_output()"}, false}, {"stop", {"(int)growtrace_attach_stop()"}, false}},
                          "stopping the tracer");
    if (std::string trouble = gdb_trouble(r, pid); !trouble.empty()) return trouble;
    if (r.results.contains("stop")) {
        if (r.results["stop"] < 0) return fmt::format("process {} is not attached (nothing to detach)", pid);
        return Stopped{r.results["stop"], r.texts["trace"]};
    }
    if (r.failure.find("No symbol") != std::string::npos)
        return fmt::format("growtrace was never attached to process {} (its library is not loaded)", pid);
    return fmt::format("could not detach from process {}: {}", pid, gdb_complaint(r));
}

// A CPython target ends its trace from a thread of the tracer once that thread has the GIL
// (the agent is undone first): wait for the trace to be complete.
bool wait_until_closed(int pid) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kCloseTimeoutSeconds);
    for (;;) {
        if (!process_exists(pid) || !tracer_writing(pid)) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

std::string default_output(int pid) {
    std::string base = fmt::format("growtrace.{}.attach", pid);
    std::string path = base + ".gtrace";
    for (int n = 2; fs::exists(path); ++n) path = fmt::format("{}{}.gtrace", base, n);
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
    auto injected = inject(o.pid, library, output, *sample_bytes);
    if (auto* why = std::get_if<std::string>(&injected)) return error(*why);
    Started started = std::get<Started>(injected);
    if (started.sites <= 0) return error(describe_start_failure(started.sites, o.pid));
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
                         started.python / 100, started.python % 100));
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
