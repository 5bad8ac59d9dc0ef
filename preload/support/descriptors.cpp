#include "preload/support/descriptors.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

namespace growtrace::preload {
namespace {

// Makes descriptors with `make` (false and errno on failure). When the program holds every
// number its soft limit allows, the limit is raised for that moment and put back.
template <class Make>
bool with_room_for_descriptors(Make make) {
    if (make()) return true;
    if (errno != EMFILE) return false;
    rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) {
        errno = EMFILE;
        return false;
    }
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max < limit.rlim_cur + 64 ? limit.rlim_max : limit.rlim_cur + 64;
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
        errno = EMFILE;
        return false;
    }
    bool made = make();
    int err = errno;
    setrlimit(RLIMIT_NOFILE, &limit);
    errno = err;
    return made;
}

// kHighDescriptor, or 16 under the soft limit when that is lower (F_DUPFD refuses a floor at or
// above it). -1: the limit is too low to keep anything apart.
long descriptor_floor() {
    rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return kHighDescriptor;
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= rlim_t(kHighDescriptor) + 16) return kHighDescriptor;
    long floor = static_cast<long>(limit.rlim_cur) - 16;
    return floor > 2 ? floor : -1;
}

int move_out_of_the_way(int fd) {
    long floor = descriptor_floor();
    if (floor > fd) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
        if (high >= 0) {
            close(fd);
            return high;
        }
    }
    return fd;
}

}  // namespace

int open_for_tracer(const char* path, int flags, mode_t mode) {
    int fd = -1;
    with_room_for_descriptors([&] {
        fd = ::open(path, flags | O_CLOEXEC, mode);
        return fd >= 0;
    });
    return fd;
}

int pipe2_out_of_the_way(int fds[2], int flags) {
    int saved_errno = errno;
    bool made = with_room_for_descriptors([&] {
        if (pipe2(fds, flags | O_CLOEXEC) != 0) return false;
        fds[0] = move_out_of_the_way(fds[0]);
        fds[1] = move_out_of_the_way(fds[1]);
        return true;
    });
    if (made) errno = saved_errno;
    return made ? 0 : -1;
}

}  // namespace growtrace::preload
