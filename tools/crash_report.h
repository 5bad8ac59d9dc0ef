// What the `growtrace` command does if it ever crashes: print its own stack and what to report,
// then die of the same signal. The traced program never depends on it: `run` and `check` have
// already exec'd it (signal handlers do not survive exec), and it keeps running, and tracing,
// if the command dies while waiting for it.
#pragma once

namespace growtrace::cli {

// Installs handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT (on their own stack, so a
// stack overflow is reported too) and for exceptions nothing caught. `argc`/`argv` are quoted
// in the report.
void install_crash_report(int argc, char** argv);

// For the tests: crash on purpose at the point named by $GROWTRACE_TEST_CRASH ("start",
// "run-wait", "exception"), so that the report and the traced program's fate can be checked.
void crash_here_for_tests(const char* where);

}  // namespace growtrace::cli
