// The tracer's own threads (writer, attach rescanner, CPython agent helpers): detached, and
// started with every signal blocked so that the program's signals are never delivered to them.
//
// Nor may they keep the process alive. The kernel ends a process when its last thread ends, and
// glibc calls exit(0) when the last thread it counts ends (a `main` that calls pthread_exit, a
// child forked from a thread that then returns); our threads count for both. So the writer
// watches for the moment only ours are left (program_has_ended) and then ends the process the
// way the program's last thread would have (end_process_for_program).
#pragma once

#include <sys/types.h>

namespace growtrace::preload {

// pthread_create's result: 0, or an errno value.
int start_tracer_thread(void* (*body)(void*), void* arg);

// In a forked child, where none of the parent's threads exist.
void tracer_threads_forget_after_fork();

// How many tracer threads are between their first and last instruction of ours.
int tracer_threads_running();

// Until the kernel no longer counts the thread `tid` (it is removed from the process a moment
// after its last instruction); at most about a second.
void wait_until_thread_gone(pid_t tid);

// Called by a tracer thread once program_has_ended() (process_stat.h): takes the signal mask of the program
// thread that created it (so a signal sent from now on does what it would do untraced) and
// calls exit(0), as glibc does when the last thread ends: atexit handlers and stdio buffers
// run, and the library's destructor finishes the trace. Never returns.
[[noreturn]] void end_process_for_program();

}  // namespace growtrace::preload
