// CPython 3.12 and later warn at os.fork() ("This process (pid=N) is multi-threaded, use of
// fork() may lead to deadlocks in the child.", a DeprecationWarning) when the 20th field of
// /proc/self/stat, the kernel's count of the process's threads, is above one. The check runs
// in the parent once fork() has returned: in 3.12 before PyOS_AfterFork_Parent (and so before
// the os.register_at_fork after_in_parent callbacks), in 3.13 after it. The tracer's writer
// thread would be counted, so a program of one thread would be warned under the tracer only.
//
// So for a fork by the only program thread, the writer leaves before the fork (preload/
// writer.h, writer_park_for_fork) and comes back through Py_AddPendingCall, which the eval
// loop runs once os.fork has returned to it (the CALL that made it checks for pending calls
// when it returns), after the check in every version. A program with threads of its own is
// counted, and warned, as it is untraced.
#pragma once

namespace growtrace::preload::python {

// True when a fork by the calling thread may be followed by that check: a CPython 3.12 or
// later is running and the caller is its main thread, where pending calls run.
bool fork_counts_threads();

// Has `function` run on the main thread once it is back in the eval loop; false if it could
// not be scheduled.
bool run_when_back_in_python(int (*function)(void*));

}  // namespace growtrace::preload::python
