#include "preload/cpython/checked_read.h"

#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

namespace growtrace::preload::python {
namespace {

std::atomic<bool> g_refused{false};

// The kernel's copy from our own address space. By thread id, not process id: the process id
// names the main thread, whose memory view is gone once it has ended while others run. Not
// cached: a forked child's threads have new ids.
// The remote side is cut at page boundaries: a transfer stops at the first piece that cannot be
// read, so the count then says how much of the beginning could.
ssize_t kernel_copy(const void* address, void* out, size_t size) {
    if (g_refused.load(std::memory_order_relaxed)) return -1;
    constexpr uintptr_t kPage = 4096;  // the smallest page: cuts at larger pages' edges too
    constexpr int kPieces = 4;
    iovec local{out, size};
    iovec remote[kPieces];
    int pieces = 0;
    auto at = reinterpret_cast<uintptr_t>(address);
    size_t left = size;
    while (left && pieces < kPieces) {
        size_t piece = pieces == kPieces - 1 ? left : std::min<size_t>(left, kPage - (at & (kPage - 1)));
        remote[pieces++] = {reinterpret_cast<void*>(at), piece};
        at += piece;
        left -= piece;
    }
    auto self = static_cast<pid_t>(syscall(SYS_gettid));
    ssize_t n = process_vm_readv(self, &local, 1, remote, pieces, 0);
    if (n < 0 && (errno == EPERM || errno == ENOSYS)) g_refused.store(true, std::memory_order_relaxed);
    return n;
}

}  // namespace

bool checked_reads_work() {
    static const bool works = [] {
        int probe = 1, copy = 0;
        return kernel_copy(&probe, &copy, sizeof copy) == static_cast<ssize_t>(sizeof copy) && copy == 1;
    }();
    return works;
}

bool copy_checked(const void* address, void* out, size_t size) {
    if (!address || size == 0) return size == 0 && address;
    const int saved = errno;  // the program's errno is not ours to change
    bool ok = kernel_copy(address, out, size) == static_cast<ssize_t>(size);
    errno = saved;
    return ok;
}

size_t copy_readable_prefix(const void* address, void* out, size_t size) {
    if (!address || size == 0) return 0;
    const int saved = errno;
    // A partial copy ends at the first unreadable page; a copy that starts on one fails.
    ssize_t n = kernel_copy(address, out, size);
    errno = saved;
    return n > 0 ? static_cast<size_t>(n) : 0;
}

}  // namespace growtrace::preload::python
