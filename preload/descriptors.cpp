#include "preload/descriptors.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace growtrace::preload {
namespace {

// kHighDescriptor, or 16 under the soft limit when that is lower (F_DUPFD refuses a floor at or
// above it). -1: the limit is too low to keep anything apart.
long descriptor_floor() {
    rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return kHighDescriptor;
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= rlim_t(kHighDescriptor) + 16) return kHighDescriptor;
    long floor = static_cast<long>(limit.rlim_cur) - 16;
    return floor > 2 ? floor : -1;
}

}  // namespace

int move_out_of_the_way(int fd) {
    if (fd < 0) return fd;
    int saved_errno = errno;
    long floor = descriptor_floor();
    if (floor > fd) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
        if (high >= 0) {
            ::close(fd);
            errno = saved_errno;
            return high;
        }
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    errno = saved_errno;
    return fd;
}

namespace {

// Makes descriptors with `make` (false and errno on failure). When the program holds every
// number its soft limit allows, the limit is raised for that moment (never past the hard
// limit) and put back: ours then sit above the program's limit, where its calls never reach.
template <class Make>
bool create_out_of_the_way(Make make) {
    if (make()) return true;
    if (errno != EMFILE) return false;
    rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) {
        errno = EMFILE;
        return false;
    }
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max < rlim_t(kHighDescriptor) + 16 ? limit.rlim_max : rlim_t(kHighDescriptor) + 16;
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

}  // namespace

int pipe2_out_of_the_way(int fds[2], int flags) {
    bool made = create_out_of_the_way([&] {
        if (pipe2(fds, flags | O_CLOEXEC) != 0) return false;
        fds[0] = move_out_of_the_way(fds[0]);
        fds[1] = move_out_of_the_way(fds[1]);
        return true;
    });
    return made ? 0 : -1;
}

bool OwnFd::open(const char* path, int flags, mode_t mode) {
    int fd = -1;
    struct stat st;
    bool made = create_out_of_the_way([&] {
        fd = ::open(path, flags | O_CLOEXEC, mode);
        if (fd < 0) return false;
        if (fstat(fd, &st) != 0) {
            int err = errno;
            ::close(fd);
            errno = err;
            return false;
        }
        fd = move_out_of_the_way(fd);
        return true;
    });
    if (!made) return false;
    fd_ = fd;
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    return true;
}

int OwnFd::get() const {
    if (fd_ < 0) return -1;
    struct stat st;
    int saved_errno = errno;
    bool same = fstat(fd_, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
    errno = saved_errno;
    return same ? fd_ : -1;
}

void OwnFd::close() {
    if (get() >= 0) ::close(fd_);
    fd_ = -1;
}

}  // namespace growtrace::preload
