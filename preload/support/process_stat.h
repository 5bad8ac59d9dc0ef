// What /proc/self/stat says about the whole process: the writer reads it for the RSS of its
// time marks and to see whether only the tracer's threads are left (tracer_thread.h); a fork
// reads it to see whether the forking thread is the program's only one (python/fork_check.h).
#pragma once

namespace growtrace::preload {

// The fields the tracer uses.
struct ProcessStat {
    char leader_state = '?';  // of the main thread: 'Z' once it ended while others run
    long threads = 0;         // threads still counted by the kernel (an ended main thread included)
    unsigned long long rss_pages = 0;
};
// Reads it from an open /proc/self/stat; false if the text is not that.
bool read_process_stat(int fd, ProcessStat& out);
// Reads /proc/self/stat on the file thread (file_thread.h), out of the program's table.
bool read_own_stat(ProcessStat& out);

// True when the process is the calling thread and tracer threads that are running.
bool caller_alone_with_tracer_threads();

// True when the program's own threads have all ended: its main thread is gone and every thread
// left is one of ours. Counts only tracer threads that are sure to be running, so it may answer
// false a tick late, never true early.
bool program_has_ended(const ProcessStat& stat);

}  // namespace growtrace::preload
