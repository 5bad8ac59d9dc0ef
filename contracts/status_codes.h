// The numbers growtrace's parts answer each other with: the `growtrace` command's exit status
// (scripts and CI read it) and the return values of the attach entry points that
// `growtrace attach` calls through gdb (preload/intercept/attach.cpp answers, tools/attach/ reads).
// Header-only and free of the standard library's heavier parts: the preload library includes it.
#pragma once

namespace growtrace {

// --- exit status of the `growtrace` command ---
// `run` exits with the traced command's own status instead (kExitSignalBase + N when signal N
// killed it); every verb exits with kExitError when growtrace itself fails (bad usage, bad
// input, unwritable output).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 2;
// `analyze --fail-on-growth`, `check`, `diff`: unbounded growth was found.
inline constexpr int kExitGrowthFound = 3;
// `check`: no growth found, but the command failed (non-zero exit, or killed by a signal).
inline constexpr int kExitCommandFailed = 4;
// A command killed by signal N is reported as kExitSignalBase + N, as shells do.
inline constexpr int kExitSignalBase = 128;

// --- return values of the attach entry points (preload/intercept/attach.h) ---
namespace attach_status {

// growtrace_attach_start / growtrace_attach_start_sampled: > 0 is the number of call sites
// redirected; otherwise one of these.
inline constexpr int kAlreadyTracing = -1;    // preloaded by `growtrace run`, or already attached
inline constexpr int kOtherAllocator = -2;    // malloc is not the one the hooks forward to
inline constexpr int kStartFailed = -3;       // the trace could not start (the process's stderr says why)
inline constexpr int kNoCallSites = -4;       // no allocation call site found to redirect
inline constexpr int kOwnHooksMissing = -5;   // the library cannot find its own hooks
inline constexpr int kTooManyCallSites = -6;  // more call sites than the table of patched slots holds (none patched)

// growtrace_attach_stop: >= 0 is the number of call sites restored; otherwise this.
inline constexpr int kNotAttached = -1;

// growtrace_attach_python: 100 * major + minor of a CPython the agent starts in (311 for 3.11),
// kNoPython, or a negative value.
inline constexpr int kNoPython = 0;           // no CPython in the process, or one growtrace does not read
inline constexpr int kAgentFilesMissing = -1; // the agent's startup files or extension are not there
inline constexpr int kAgentAlreadyAttached = -3;
// Never returned by the library: `growtrace attach` stands it in when gdb reported no result
// for the call.
inline constexpr int kAgentNotCalled = -9;

// 100 * major + minor, as growtrace_attach_python returns a version.
constexpr int python_version_code(int major, int minor) { return major * 100 + minor; }
constexpr long python_major(long code) { return code / 100; }
constexpr long python_minor(long code) { return code % 100; }

}  // namespace attach_status
}  // namespace growtrace
