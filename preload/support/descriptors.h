// The tracer keeps no file descriptor of its own in the program's table, ever. Its file work
// (a block appended to the trace, /proc/self/stat read) is done on the file thread, whose
// descriptor table is its own (file_thread.h); libunwind's address-checking pipe is replaced by
// a check that needs no descriptor (unwinder.cpp). So a program that checks or lists its
// descriptors, dup2()s onto a free number, passes them to a child (subprocess's pass_fds,
// close_fds) or closes "all of them above 2" finds only its own, and no child ever inherits one
// of ours.
//
// What is left in the program's table, for the microseconds an open lasts: the trace's
// creation and /proc/self/cmdline's read when a trace begins (before main, in a forked child
// before it returns from fork, or on attach), and every open when the kernel refuses the file
// thread a table of its own (before Linux 5.9, or under a seccomp policy that refuses
// close_range). Such a descriptor takes the lowest free number and is closed at once.
#pragma once

#include <sys/types.h>

namespace growtrace::preload {

// open(2) with O_CLOEXEC, for a descriptor the caller closes as soon as it is done. When the
// program holds every number its soft RLIMIT_NOFILE allows, the limit is raised for that moment
// (never past the hard limit) and put back: the tracer does not lose its trace because the
// program ran out of descriptors. -1 and errno on failure.
int open_for_tracer(const char* path, int flags, mode_t mode = 0);

// pipe2() whose ends are moved out of the way: close-on-exec, numbered from kHighDescriptor (or
// just under a lower soft limit). For a pipe that must stay open, where there is no other way.
inline constexpr int kHighDescriptor = 1000;
int pipe2_out_of_the_way(int fds[2], int flags);

}  // namespace growtrace::preload
