// The tracer's own threads (writer, attach rescanner, CPython agent helpers): detached, and
// started with every signal blocked so that the program's signals are never delivered to them.
//
// Nor may they keep the process alive. The kernel ends a process when its last thread ends, and
// glibc calls exit(0) when the last thread it counts ends (a `main` that calls pthread_exit, a
// child forked from a thread that then returns); our threads count for both. So the writer
// watches for the moment only ours are left (program_has_ended) and then ends the process the
// way the program's last thread would have (end_process_for_program).
#pragma once

namespace growtrace::preload {

// pthread_create's result: 0, or an errno value.
int start_tracer_thread(void* (*body)(void*), void* arg);

// In a forked child, where none of the parent's threads exist.
void tracer_threads_forget_after_fork();

// What /proc/self/stat says about the whole process.
struct ProcessStat {
    char leader_state = '?';  // of the main thread: 'Z' once it ended while others run
    long threads = 0;         // threads still counted by the kernel (an ended main thread included)
    unsigned long long rss_pages = 0;
};
// Reads it from an open /proc/self/stat; false if the text is not that.
bool read_process_stat(int fd, ProcessStat& out);
// Reads /proc/self/stat, opened for the read only: no descriptor of ours stays in the
// program's table.
bool read_own_stat(ProcessStat& out);

// True when the process is the calling thread and one tracer thread, which is running.
bool caller_alone_with_one_tracer_thread();

// True when the program's own threads have all ended: its main thread is gone and every thread
// left is one of ours. Counts only tracer threads that are sure to be running, so it may answer
// false a tick late, never true early.
bool program_has_ended(const ProcessStat& stat);

// Called by a tracer thread once program_has_ended(): takes the signal mask of the program
// thread that created it (so a signal sent from now on does what it would do untraced) and
// calls exit(0), as glibc does when the last thread ends: atexit handlers and stdio buffers
// run, and the library's destructor finishes the trace. Never returns.
[[noreturn]] void end_process_for_program();

}  // namespace growtrace::preload
