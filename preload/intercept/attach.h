// Attach mode: libgrowtrace.so dlopen'ed into a running process by `growtrace attach` (through
// gdb) instead of preloaded. The library then stays idle until growtrace_attach_start() and
// goes idle again at growtrace_attach_stop(); once it has redirected anything it is never
// unloaded (threads may still be inside a hook). A start that fails has redirected nothing and
// leaves nothing running or open, so `growtrace attach` unloads it (dlclose). The functions are
// exported with C linkage for the debugger to call; their failure codes are named in
// contracts/status_codes.h (attach_status):
//
//   int growtrace_attach_start(const char* output)
//       > 0  tracing to `output` (which must not exist yet); the number of GOT slots redirected
//            (every hook of the library: allocation functions, fork, exit, exec, dlclose)
//       kAlreadyTracing   the library was preloaded by `growtrace run`, or is already attached
//       kOtherAllocator   the process's malloc is not the one the hooks would forward to
//                         (another allocator was preloaded): attaching would mix two heaps
//       kStartFailed      the trace could not be started (the reason is logged to stderr)
//       kNoCallSites      no allocation call site found to redirect
//       kOwnHooksMissing  the library cannot find its own hooks
//       kTooManyCallSites more call sites than the table of patched slots holds (none patched)
//   int growtrace_attach_start_sampled(const char* output, unsigned long long sample_bytes)
//       the same, sampling allocations with a mean of `sample_bytes` bytes between samples
//       (0: every allocation; preload/record/sampler.h)
//   int growtrace_attach_stop(void)
//       >= 0 slots restored; the trace ends with an End record and is closed (the writer
//            thread, "growtrace-wr", is gone once it is; for a CPython process that happens
//            on a thread of ours once it has the GIL)
//       kNotAttached
//   const char* growtrace_attach_output(void)
//       the trace of the current attach, or of the last one; "" if there was none
//   int growtrace_attach_python(const char* startup_dir, const char* extension_path)
//       called before the start: the CPython agent's files; python_version_code(3, 11) = 311
//       when the agent will start with the trace, kNoPython, kAgentFilesMissing or
//       kAgentAlreadyAttached
#pragma once

namespace growtrace::preload {

// True when the library was loaded by dlopen without `growtrace run`'s environment
// (GROWTRACE_OUTPUT unset and LD_PRELOAD not naming libgrowtrace): the constructor must not
// start tracing.
bool loaded_for_attach();

// This library's path while it is attached (also in a forked child of the attached process),
// else nullptr: an image exec'd from here is traced by preloading it.
const char* attached_library();

}  // namespace growtrace::preload
