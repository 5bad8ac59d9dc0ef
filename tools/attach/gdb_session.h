// One run of gdb against a process: it attaches, runs tools/attach/gdb_script.py (pick a
// thread outside the allocator, loader and stdio, then the calls in order) and detaches.
// gdb runs in its own process group, passes every signal on to the program, unwinds a call
// that is interrupted, and is interrupted itself past kGdbTimeoutSeconds. libgrowtrace-gdb-
// xstate.so (gdb_xstate_shim.c) is preloaded into it, so that a gdb before 14 can write
// registers where the CPU's XSAVE state is larger than it knows (AMX).
#pragma once

#include <string>
#include <vector>

#include "attach/gdb_output.h"

namespace growtrace::cli {

// How long the script lets a thread run to get out of the allocator, loader or stdio before
// it gives up and calls nothing, unless told otherwise (`attach --max-wait`).
inline constexpr int kWaitSeconds = 15;
// gdb normally needs well under 10 s; a process stopped inside its allocator's lock could make
// dlopen wait forever, which this bounds.
inline constexpr int kGdbTimeoutSeconds = 60;
// After gdb is interrupted, how long it may take to unwind the call and detach before it is
// killed.
inline constexpr int kGdbGraceSeconds = 10;

// A call for the script: its name, the expressions to try in turn (the next one only when gdb
// does not know a symbol of the previous), and whether a 0 result stops the calls after it.
// An expression cast to (char*) gives text, read from the process; $gt_NAME in an expression is
// the result of the earlier call NAME. With `after_failed`, the call runs only if the call of
// that name answered <= 0 and no thread is stopped inside libgrowtrace (an undo: dlclose).
struct GdbCall {
    std::string name;
    std::vector<std::string> expressions;
    bool required = true;
    std::string after_failed;
};

struct GdbResult : GdbReport {
    int wait_seconds = kWaitSeconds;  // what the script was given
    bool started = false;
    bool timed_out = false;  // past kGdbTimeoutSeconds: gdb was interrupted (the call unwound)
    bool killed = false;     // and did not detach on its own within kGdbGraceSeconds
};

// The gdb command that runs the script with these calls: `python exec("...")`.
std::string gdb_python_command(const std::vector<GdbCall>& calls, int wait_seconds = kWaitSeconds);

// Runs gdb on the process with these calls. `doing` names the job in the notes printed while
// the program is let run. What gdb printed is also appended to $GROWTRACE_GDB_LOG if set.
// `wait_seconds`: how long the program may be let run to leave its allocator, loader or stdio.
GdbResult run_gdb(int pid, const std::vector<GdbCall>& calls, const std::string& doing,
                  int wait_seconds = kWaitSeconds);

// Why gdb did not get through the calls, when it is not the calls' own answer. Empty if it did.
std::string gdb_trouble(const GdbResult& r, int pid);

}  // namespace growtrace::cli
