// The calls `growtrace attach` and `detach` make in the process through gdb: load
// libgrowtrace.so, hand it the CPython agent's paths, start and stop tracing
// (preload/intercept/attach.h), and what their answers (contracts/status_codes.h) mean.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

namespace growtrace::cli {

// A CPython target finishes its trace when the tracer's thread gets the GIL: normally within
// milliseconds (the interpreter hands it over every 5 ms).
inline constexpr int kCloseTimeoutSeconds = 30;

struct Started {
    long sites = 0;   // redirected call sites, or an attach_status code of growtrace_attach_start
    long python = 0;  // growtrace_attach_python: a CPython version code, kNoPython, or < 0 an error
    int waits = 0;    // times gdb let the program run to get out of its allocator first
    // A failed start (sites <= 0): whether the library was unloaded again, else why not.
    bool unloaded = false;
    std::string unload_failure;
};

// Loads the library and starts tracing to `output`, and the CPython agent where there is one.
// Returns what the start answered, or why gdb did not get that far. `wait_seconds`: how long
// the program may be let run to leave its allocator, loader or stdio first.
std::variant<Started, std::string> inject(int pid, const std::string& library, const std::string& output,
                                          uint64_t sample_bytes, int wait_seconds);

// What a failed start (Started::sites <= 0) means, for an error message.
std::string describe_start_failure(long rc, int pid);
// The same, and whether the library was unloaded.
std::string describe_start_failure(const Started& started, int pid);

struct Stopped {
    long sites = 0;     // restored call sites
    std::string trace;  // the trace that ends
};
// Stops tracing; an error if the process was not attached or gdb failed.
std::variant<Stopped, std::string> stop(int pid);

// A CPython target ends its trace from a thread of the tracer once that thread has the GIL
// (the agent is undone first): waits for the trace to be complete, at most
// kCloseTimeoutSeconds. False if it is not.
bool wait_until_closed(int pid);

}  // namespace growtrace::cli
