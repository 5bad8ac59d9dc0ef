#include "attach/tracer_calls.h"

#include <dlfcn.h>
#include <fmt/core.h>

#include <chrono>
#include <thread>
#include <vector>

#include "attach/gdb_session.h"
#include "attach/target_process.h"
#include "contracts/status_codes.h"
#include "paths.h"

namespace growtrace::cli {

namespace {

// __libc_dlopen_mode's flags: RTLD_NOW | __RTLD_DLOPEN (glibc's internal "called as dlopen").
constexpr unsigned kLibcDlopenFlags = RTLD_NOW | 0x80000000u;

std::string c_string_literal(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

// A call of `function` of the library just loaded, found with dlsym in gdb's $gt_load (gdb
// reads no symbols of libraries loaded while it is attached: gdb_session.cpp).
std::vector<std::string> loaded_function(const std::string& type, const std::string& function,
                                         const std::string& arguments) {
    std::vector<std::string> calls;
    for (const char* lookup : {"dlsym", "__libc_dlsym"})
        calls.push_back(fmt::format("(long)(({})((void*){}((void*)$gt_load, \"{}\")))({})", type, lookup, function,
                                    arguments));
    return calls;
}

}  // namespace

std::string describe_start_failure(const Started& started, int pid) {
    std::string why = describe_start_failure(started.sites, pid);
    if (started.unloaded) return why + fmt::format("; what attach loaded was unloaded and process {} runs on as it was", pid);
    return why + fmt::format("; the tracer could not be unloaded ({}): it stays loaded in process {}, idle, with nothing "
                             "redirected", started.unload_failure, pid);
}

std::string describe_start_failure(long rc, int pid) {
    switch (rc) {
        case attach_status::kAlreadyTracing: return fmt::format("process {} is already traced by growtrace (started with growtrace run, or attached)", pid);
        case attach_status::kOtherAllocator: return fmt::format("process {} uses another allocator than libc's malloc (preloaded?); attaching would mix two heaps", pid);
        case attach_status::kStartFailed: return fmt::format("the tracer could not start in process {} (its stderr says why)", pid);
        case attach_status::kNoCallSites: return fmt::format("no call to malloc & co found to redirect in process {}", pid);
        case attach_status::kOwnHooksMissing: return fmt::format("the tracer library loaded into process {} cannot find its own hooks", pid);
        case attach_status::kTooManyCallSites: return fmt::format("process {} has more calls to malloc & co than the tracer can redirect; none was redirected", pid);
        default: return fmt::format("the tracer in process {} failed to start (code {})", pid, rc);
    }
}

std::variant<Started, std::string> inject(int pid, const std::string& library, const std::string& output,
                                          uint64_t sample_bytes, int wait_seconds) {
    std::string agent = python_agent_dir(library);
    // dlopen is in libc since glibc 2.34; older processes that do not link libdl only have
    // glibc's internal __libc_dlopen_mode. The agent's paths go before the start: gdb
    // allocates them in the process, which must not be traced yet.
    std::vector<GdbCall> calls = {
        {"load",
         {fmt::format("(long)dlopen({}, {})", c_string_literal(library), RTLD_NOW),
          fmt::format("(long)__libc_dlopen_mode({}, {:#x})", c_string_literal(library), kLibcDlopenFlags)},
         true, ""},
        {"python",
         agent.empty() ? std::vector<std::string>{"(int)0"}
                       : loaded_function("int(*)(const char*, const char*)", "growtrace_attach_python",
                                         fmt::format("{}, {}", c_string_literal(agent + "/startup"),
                                                     c_string_literal(python_agent_extension(agent)))),
         false, ""},
        {"start",
         loaded_function("int(*)(const char*, unsigned long long)", "growtrace_attach_start_sampled",
                         fmt::format("{}, {}ULL", c_string_literal(output), sample_bytes)),
         false, ""},
        // A start that failed left nothing running, pointed to or open (preload/intercept/attach.cpp):
        // what was loaded is unloaded, with the call that loaded it.
        {"unload", {"(int)dlclose((void*)$gt_load)", "(int)__libc_dlclose((void*)$gt_load)"}, false, "start"}};
    GdbResult r = run_gdb(pid, calls, "loading the tracer", wait_seconds);
    if (std::string trouble = gdb_trouble(r, pid); !trouble.empty()) return trouble;
    if (r.results.contains("start")) {
        Started started{r.results["start"], r.results.contains("python") ? r.results["python"] : attach_status::kAgentNotCalled,
                        r.waits, false, ""};
        if (started.sites <= 0) {
            started.unloaded = r.results.contains("unload") && r.results["unload"] == 0;
            if (!started.unloaded)
                started.unload_failure = r.failed_call == "unload"      ? r.failure
                                         : r.results.contains("unload") ? "dlclose failed"
                                                                        : "gdb did not get to it";
        }
        return started;
    }
    if (r.results.contains("load") && r.results["load"] == 0)
        return fmt::format("the dynamic loader of process {} refused {}", pid, library);
    std::string complaint = r.complaint();
    return fmt::format("could not load the tracer into process {}: {}", pid, complaint.empty() ? "gdb failed" : complaint);
}

std::variant<Stopped, std::string> stop(int pid) {
    GdbResult r = run_gdb(pid, {{"trace", {"(char*)growtrace_attach_output()"}, false, ""}, {"stop", {"(int)growtrace_attach_stop()"}, false, ""}},
                          "stopping the tracer");
    if (std::string trouble = gdb_trouble(r, pid); !trouble.empty()) return trouble;
    if (r.results.contains("stop")) {
        if (r.results["stop"] < 0)  // attach_status::kNotAttached
            return fmt::format("process {} is not attached (nothing to detach)", pid);
        return Stopped{r.results["stop"], r.texts["trace"]};
    }
    if (r.failure.find("No symbol") != std::string::npos)
        return fmt::format("growtrace was never attached to process {} (its library is not loaded)", pid);
    return fmt::format("could not detach from process {}: {}", pid, r.complaint());
}

bool wait_until_closed(int pid) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kCloseTimeoutSeconds);
    for (;;) {
        if (!process_exists(pid) || !tracer_writing(pid)) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

}  // namespace growtrace::cli
