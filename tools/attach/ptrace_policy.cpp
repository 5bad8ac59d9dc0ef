#include "attach/ptrace_policy.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "attach/target_process.h"
#include "elf_check.h"
#include "launcher.h"

namespace growtrace::cli {

namespace fs = std::filesystem;

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

}  // namespace growtrace::cli
