// growtrace run [-o FILE] [--no-follow-exec] [--no-follow-fork] -- COMMAND [ARGS...]
//
// Checks that the command exists and that LD_PRELOAD can reach it, then runs it with
// libgrowtrace.so preloaded (environment contract in docs/architecture.md), waits, says where
// the traces are, and exits with the command's status.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/core.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "common.h"
#include "contracts/environment.h"
#include "contracts/trace_names.h"
#include "crash_report.h"
#include "paths.h"
#include "elf_check.h"
#include "launcher.h"
#include "run_command.h"
#include "trace_folding.h"

extern char** environ;

namespace growtrace::cli {

namespace {

namespace fs = std::filesystem;

// Makes room for the trace at `path`: checks that it can be created and leaves no file there
// (the tracer creates it with O_EXCL, and would otherwise pick another name). An existing
// regular file is replaced, as -o promises; anything else (a directory, /dev/full, a fifo) is
// left alone. Returns why the trace cannot go there, or nothing.
std::optional<std::string> prepare_trace_path(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) return std::string(strerror(EISDIR));
        if (!S_ISREG(st.st_mode)) return std::string("not a regular file (a trace is a file of its own)");
        int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) return std::string(strerror(errno));
        close(fd);
        if (unlink(path.c_str()) != 0) return std::string(strerror(errno));
    }
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return std::string(strerror(errno));
    close(fd);
    unlink(path.c_str());
    return std::nullopt;
}

// The traces the tracer derives from the main one (contracts/trace_names.h): its forked
// children's and exec'd images', recursively, all beside it.
struct TraceFamily {
    fs::path directory;
    std::string main_name;

    explicit TraceFamily(const std::string& trace_path) {
        fs::path p(trace_path);
        directory = p.parent_path();
        main_name = p.filename().string();
    }

    // name -> (size, mtime) of every family member other than the main trace.
    using Members = std::map<std::string, std::pair<uintmax_t, fs::file_time_type>>;
    Members members() const {
        Members found;
        std::error_code ec;
        for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
            std::string name = it->path().filename().string();
            if (trace_names::relation(name, main_name) == trace_names::Relation::None) continue;
            std::error_code stat_ec;
            auto size = fs::file_size(it->path(), stat_ec);
            auto mtime = fs::last_write_time(it->path(), stat_ec);
            if (!stat_ec) found[name] = {size, mtime};
        }
        return found;
    }
};

std::string assignment(const char* name, const std::string& value) { return std::string(name) + "=" + value; }

// An inherited NAME=VALUE that `growtrace run` sets itself: its own value replaces it.
bool set_by_run(std::string_view entry) {
    std::string_view name = entry.substr(0, entry.find('='));
    const environment::Variable* v = environment::find(name);
    return v != nullptr && v->set_by_run;
}

std::vector<std::string> traced_environment(const std::string& library, const std::string& output,
                                            const RunOptions& options, uint64_t sample_bytes) {
    std::vector<std::string> env;
    std::string old_preload;
    std::optional<std::string> old_pythonpath;
    for (char** e = environ; *e != nullptr; ++e) {
        std::string entry = *e;
        if (entry.starts_with("LD_PRELOAD=")) {
            old_preload = entry.substr(11);
            continue;
        }
        if (entry.starts_with("PYTHONPATH=")) {
            old_pythonpath = entry.substr(11);
            continue;
        }
        if (set_by_run(entry)) continue;
        env.push_back(std::move(entry));
    }
    env.push_back("LD_PRELOAD=" + library + (old_preload.empty() ? "" : ":" + old_preload));
    env.push_back(assignment(environment::kOutput, output));
    env.push_back(assignment(environment::kFollowExec, options.no_follow_exec ? "0" : "1"));
    env.push_back(assignment(environment::kFollowFork, options.no_follow_fork ? "0" : "1"));
    env.push_back(assignment(environment::kPythonObjects, options.no_python_objects ? "0" : "1"));
    env.push_back(assignment(environment::kSample, std::to_string(sample_bytes)));
    // A Python program finds the agent's sitecustomize first on its path; the agent removes
    // itself and restores PYTHONPATH (from environment::kPythonPathOrig) before the program runs.
    // Harmless for other programs.
    std::string agent = python_agent_dir(library);
    if (!agent.empty()) {
        std::string original = old_pythonpath.value_or("");
        env.push_back("PYTHONPATH=" + agent + "/startup" + (original.empty() ? "" : ":" + original));
        env.push_back(assignment(environment::kPythonPathOrig, original));
        env.push_back(assignment(environment::kPyagentExt, python_agent_extension(agent)));
    } else if (old_pythonpath) {
        env.push_back("PYTHONPATH=" + *old_pythonpath);
    }
    return env;
}

std::vector<std::string> current_environment() {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    return env;
}

// Refuses commands LD_PRELOAD cannot reach. Returns an error message or nothing.
std::optional<std::string> check_preloadable(const std::string& word, const std::string& resolved) {
    LoadedImage image = resolve_loaded_image(resolved);
    if (!image.error.empty()) return image.error;
    ElfInfo info = inspect_elf(image.path);
    std::string what = image.chain.empty()
                           ? word
                           : fmt::format("{} (run by the interpreter {})", word, image.path);
    switch (info.linkage) {
        case Linkage::Static:
            return fmt::format("{} is statically linked; LD_PRELOAD cannot inject into it", what);
        case Linkage::Dynamic:
            if (!matches_own_architecture(info)) {
                return fmt::format("{} is built for another architecture or ELF class than "
                                   "libgrowtrace.so; LD_PRELOAD cannot inject into it",
                                   what);
            }
            return std::nullopt;
        case Linkage::NotElf:
            return std::nullopt;  // run by /bin/sh, which is checked implicitly by being dynamic
        case Linkage::Unreadable:
            warning(fmt::format("cannot inspect {} ({}); tracing it anyway", image.path, info.error));
            return std::nullopt;
    }
    return std::nullopt;
}

// Why the main trace is missing or empty, best guess first.
std::string why_no_trace(const std::string& resolved, const ChildExit& exit_status) {
    struct stat st {};
    LoadedImage image = resolve_loaded_image(resolved);
    if (stat(image.path.c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) != 0 &&
        getuid() != 0) {
        return "the program is setuid/setgid, and the dynamic loader ignores LD_PRELOAD for it";
    }
    if (exit_status.signaled && exit_status.status == SIGKILL) {
        return "the command was killed by SIGKILL before the tracer wrote anything";
    }
    return "libgrowtrace.so did not start in the command (did it clear LD_PRELOAD from its "
           "environment, or was the library refused by the dynamic loader? its message, if any, "
           "is above)";
}

}  // namespace

void add_run_options(CLI::App* sub, RunOptions& options) {
    sub->add_option("-o,--output", options.output,
                    "Trace file, replaced if it exists (default: growtrace.<pid>.gtrace in the current "
                    "directory). A forked child writes <stem>.<pid>.gtrace, an exec'd program "
                    "<stem>.exec<N>.gtrace.");
    sub->add_flag("--no-follow-exec", options.no_follow_exec,
                  "Do not trace programs the command execs (they run without the library)");
    sub->add_flag("--no-follow-fork", options.no_follow_fork, "Do not trace processes the command forks");
    sub->add_flag("--no-python-objects", options.no_python_objects,
                  "CPython: do not hook the object allocator (PEP 445). About twice as fast on object-heavy "
                  "programs, but objects of 512 bytes or less are then seen only as the 256 KiB arenas "
                  "pymalloc takes from malloc, so their Python frames are lost");
    sub->add_flag("--keep-helper-traces", options.keep_helper_traces,
                  "Keep every trace: by default an exec chain (a pyenv shim, env, a shell, then the program) "
                  "leaves the program's trace under the -o name, and short-lived helpers that allocated "
                  "little (launchers, subshells, uname...) leave none, only a count");
    add_sampling_options(sub, options.sampling, "Default: every allocation (--full).");
}

namespace {

// The command's program found in PATH, or the error line that says why it cannot run (written).
std::optional<std::string> resolve_program(const std::string& word) {
    auto resolved = find_in_path(word);
    if (resolved) return resolved;
    struct stat st {};
    if (word.find('/') != std::string::npos && stat(word.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) error(fmt::format("cannot execute {}: Is a directory", word));
        else error(fmt::format("cannot execute {}: Permission denied", word));
    } else {
        error(fmt::format("command not found: {}", word));
    }
    return std::nullopt;
}

// The preload library's path, or nothing after the error line that says why it cannot be used.
std::optional<std::string> usable_preload_library() {
    std::string library = preload_library_path();
    if (access(library.c_str(), R_OK) != 0) {
        error(fmt::format("preload library not found: {} (build it, or set GROWTRACE_PRELOAD "
                          "to the path of libgrowtrace.so)",
                          library));
        return std::nullopt;
    }
    if (library.find_first_of(" :") != std::string::npos) {
        error(fmt::format("the preload library path {} contains a space or ':', which "
                          "LD_PRELOAD cannot express",
                          library));
        return std::nullopt;
    }
    return library;
}

// The traces the run left, said one line each: the program's (an exec chain folded into it,
// helpers' traces dropped: trace_folding.h), then its children's; or why there is none.
void report_traces(const RunOptions& options, const std::string& output, const TraceFamily& family,
                   const TraceFamily::Members& members_before, pid_t pid,
                   const std::string& resolved, const ChildExit& exit_status, RunOutcome* outcome) {
    // If the name was taken by the time the tracer started, it wrote <stem>.<pid>.gtrace.
    std::string fallback = trace_names::forked_child(family.main_name, pid);
    std::string written;
    struct stat st {};
    if (stat(output.c_str(), &st) == 0 && st.st_size > 0) {
        written = output;
    } else if (!members_before.contains(fallback) && stat((family.directory / fallback).c_str(), &st) == 0 &&
               st.st_size > 0) {
        written = (family.directory / fallback).string();
    }
    std::vector<std::string> others;
    for (const auto& [name, stamp] : family.members()) {
        if ((family.directory / name).string() == written) continue;
        auto old = members_before.find(name);
        if (old != members_before.end() && old->second == stamp) continue;
        others.push_back((family.directory / name).string());
    }
    std::string summary;
    if (!written.empty()) {
        FoldedTraces folded = fold_traces(written, others, !options.keep_helper_traces);
        written = folded.program_trace;
        others = folded.kept;
        summary = folding_summary(folded);
    }
    if (!written.empty()) {
        if (outcome) outcome->trace = written;
        note(fmt::format("trace written to {}", written));
    } else {
        if (stat(output.c_str(), &st) == 0 && st.st_size == 0) unlink(output.c_str());
        note(fmt::format("no trace was written to {}: {}", output, why_no_trace(resolved, exit_status)));
    }
    if (!summary.empty()) note(summary);
    for (const std::string& path : others) {
        std::string name = fs::path(path).filename().string();
        bool exec_image = trace_names::relation(name, family.main_name) == trace_names::Relation::ExecImage;
        if (outcome) outcome->other_traces.push_back(path);
        note(fmt::format("trace of {} written to {}", exec_image ? "an exec'd program" : "a child process", path));
    }
}

}  // namespace

int run_command(const RunOptions& options, std::vector<std::string> command, RunOutcome* outcome) {
    if (command.empty()) {
        return error("no command given; usage: growtrace run [OPTIONS] -- COMMAND [ARGS...]");
    }
    const std::string& word = command[0];
    auto resolved = resolve_program(word);
    if (!resolved) return kExitError;
    if (auto problem = check_preloadable(word, *resolved)) return error(*problem);
    std::optional<uint64_t> sample_bytes = options.sampling.bytes(0);
    if (!sample_bytes) return kExitError;
    std::optional<std::string> library = usable_preload_library();
    if (!library) return kExitError;

    Launcher launcher;
    pid_t pid = launcher.start(*resolved, command);
    if (pid < 0) return error(fmt::format("cannot start {}: {}", word, strerror(errno)));

    std::string output = options.output.empty()
                             ? fmt::format("{}/{}", current_directory(), trace_names::unnamed(pid))
                             : make_absolute(options.output);
    bool traced = true;
    if (auto why = prepare_trace_path(output)) {
        warning(fmt::format("cannot write trace to {}: {}; running the command untraced", output, *why));
        traced = false;
    }

    TraceFamily family(output);
    TraceFamily::Members members_before = traced ? family.members() : TraceFamily::Members{};

    int exec_errno = launcher.release(traced ? traced_environment(*library, output, options, *sample_bytes)
                                             : current_environment());
    crash_here_for_tests("run-wait");
    ChildExit exit_status = launcher.wait();
    if (exec_errno != 0 && exec_errno != EPIPE) {
        return error(fmt::format("cannot execute {}: {}", *resolved, strerror(exec_errno)));
    }
    if (outcome) outcome->started = true;
    if (traced) report_traces(options, output, family, members_before, pid, *resolved, exit_status, outcome);

    if (exit_status.signaled) {
        note(fmt::format("command killed by signal {} ({})", exit_status.status,
                         signal_name(exit_status.status)));
        return kExitSignalBase + exit_status.status;
    }
    return exit_status.status;
}

Verb add_run_verb(CLI::App& parent, const Trailing& trailing) {
    auto options = std::make_shared<RunOptions>();
    CLI::App* sub = parent.add_subcommand(
        "run",
        "Run COMMAND with libgrowtrace.so preloaded and record its allocations.\n"
        "Usage: growtrace run [-o TRACE] [--sample SIZE | --full] [--no-python-objects] [OPTIONS] -- COMMAND "
        "[ARGS...]\n"
        "Exits with the command's status (128+N if it was killed by signal N).");
    add_run_options(sub, *options);
    // The first word that is not one of our options starts the command.
    sub->prefix_command();

    return {sub, [sub, options, &trailing] {
                std::vector<std::string> command = sub->remaining();
                if (!command.empty() && command[0].starts_with("-")) {
                    return error(fmt::format("run: unknown option {} (put the command after '--')",
                                             command[0]));
                }
                if (trailing.present) {
                    // "run ls -- -x": the "--" was the command's own argument.
                    if (!command.empty()) command.push_back("--");
                    command.insert(command.end(), trailing.words.begin(), trailing.words.end());
                }
                return run_command(*options, std::move(command));
            }};
}

}  // namespace growtrace::cli
