// The tracer's file descriptors (the trace, /proc/self/stat, libunwind's pipe) live out of the
// program's way: close-on-exec, so no child ever inherits one, and numbered from
// kHighDescriptor (or just under a lower RLIMIT_NOFILE), so the program's own open() and
// pipe() calls get the numbers they would get untraced and a program that checks its low
// descriptors (CPython's test support checks 0-255) finds none of ours. A program that lists
// /proc/self/fd still sees them.
//
// The program may close them (closing "every descriptor above 2" is common) and reuse their
// numbers: OwnFd recognises its file again by device and inode before each use, and never
// closes a descriptor that is no longer its own.
#pragma once

#include <sys/types.h>

namespace growtrace::preload {

inline constexpr int kHighDescriptor = 1000;

// Moves `fd` to the lowest free number at or above the floor, close-on-exec, and closes `fd`.
// Returns the new number, or `fd` itself (still open) when nothing is free up there.
int move_out_of_the_way(int fd);

// pipe2() whose ends are moved out of the way (the flags are kept).
int pipe2_out_of_the_way(int fds[2], int flags);

class OwnFd {
public:
    // open(2) then move_out_of_the_way; remembers what the descriptor is. False (errno set) on
    // failure.
    bool open(const char* path, int flags, mode_t mode = 0);
    // The descriptor if it still refers to the file opened, else -1 (the program closed it, or
    // closed it and opened something else under its number).
    int get() const;
    // get() without the check, for the hot paths that only read (pread of /proc).
    int raw() const { return fd_; }
    bool is_open() const { return fd_ >= 0; }
    bool same_file(const OwnFd& other) const { return dev_ == other.dev_ && ino_ == other.ino_; }
    // Closes the descriptor if it is still ours, and forgets it either way.
    void close();

private:
    int fd_ = -1;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
};

}  // namespace growtrace::preload
