// The tracer keeps no file descriptor of its own in the program's table between uses. It
// opens the trace to append a block and /proc/self/stat to read it, and closes them again at
// once, on its writer thread (a few times a second); libunwind's address-checking pipe is
// replaced by a check that needs no descriptor (unwinder.cpp). So a program that checks or lists
// its descriptors, passes them to a child (subprocess's pass_fds, close_fds) or closes "all of
// them above 2" finds only its own, and no child ever inherits one of ours.
//
// What is left: for the microseconds an open lasts, one descriptor of ours exists, and it takes
// the lowest free number; a thread of the program that closes a descriptor and opens another
// at that very moment, counting on getting the number back, gets the next one instead.
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
