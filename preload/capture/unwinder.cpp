#include "preload/capture/unwinder.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "contracts/environment.h"
#include "preload/capture/cfi_unwinder.h"
#include "preload/support/descriptors.h"
#include "preload/support/got_patcher.h"
#include "preload/support/log.h"

namespace growtrace::preload {
namespace {

// libunwind checks that an address can be read before it loads from it, by write()-ing one
// byte from there into a pipe of its own (EFAULT: it cannot). That pipe would be two
// descriptors in the program's table, to be seen, passed to children or closed (and then,
// reopened under numbers the program uses, read from and written to). libunwind's calls that
// make and use it (pipe2, read, close, syscall(SYS_write)) are redirected through its GOT to
// these stand-ins: the "pipe" is two numbers no descriptor can have, and the check reads the
// byte with process_vm_readv, which needs no descriptor. Where that system call is refused
// (seccomp), a real pipe is made after all, out of the program's way.
constexpr int kFakeRead = INT_MAX - 1;
constexpr int kFakeWrite = INT_MAX;
std::atomic<int> g_fallback_pipe[2] = {-1, -1};

bool readable(const void* address) {
    static std::atomic<bool> refused{false};
    if (!refused.load(std::memory_order_relaxed)) {
        char byte;
        iovec local{&byte, 1};
        iovec remote{const_cast<void*>(address), 1};
        // By thread id: the process id names the main thread, whose memory is gone once it
        // ended (pthread_exit) while others run. Not cached: a forked child has new ids.
        auto self = static_cast<pid_t>(syscall(SYS_gettid));
        if (process_vm_readv(self, &local, 1, &remote, 1, 0) == 1) return true;
        if (errno != EPERM && errno != ENOSYS) return false;
        refused.store(true, std::memory_order_relaxed);
    }
    if (g_fallback_pipe[1].load() < 0) {
        int fds[2];
        if (pipe2_out_of_the_way(fds, O_NONBLOCK) != 0) return false;
        int expected = -1;
        if (g_fallback_pipe[1].compare_exchange_strong(expected, fds[1])) g_fallback_pipe[0].store(fds[0]);
        else close(fds[0]), close(fds[1]);
    }
    char drain[64];
    while (read(g_fallback_pipe[0].load(), drain, sizeof drain) > 0) {}
    return write(g_fallback_pipe[1].load(), address, 1) == 1;
}

int unwind_pipe2(int fds[2], int) {
    fds[0] = kFakeRead;
    fds[1] = kFakeWrite;
    return 0;
}

ssize_t unwind_read(int fd, void* buffer, size_t size) {
    if (fd != kFakeRead) return read(fd, buffer, size);
    errno = EAGAIN;  // an empty pipe: what libunwind expects between checks
    return -1;
}

int unwind_close(int fd) { return fd == kFakeRead || fd == kFakeWrite ? 0 : close(fd); }

// libunwind calls syscall(SYS_write, fd, address, 1) for the check. Other system calls pass
// through with six arguments, as many as the kernel takes.
long unwind_syscall(long number, long a, long b, long c, long d, long e, long f) {
    if (number != SYS_write || a != kFakeWrite) return syscall(number, a, b, c, d, e, f);
    if (readable(reinterpret_cast<const void*>(b))) {
        errno = 0;
        return 1;
    }
    errno = EFAULT;
    return -1;
}

void redirect_unwinder_descriptors(void* inside_libunwind) {
    got_redirect_in_object(inside_libunwind, "pipe2", reinterpret_cast<void*>(&unwind_pipe2));
    got_redirect_in_object(inside_libunwind, "read", reinterpret_cast<void*>(&unwind_read));
    got_redirect_in_object(inside_libunwind, "close", reinterpret_cast<void*>(&unwind_close));
    got_redirect_in_object(inside_libunwind, "syscall", reinterpret_cast<void*>(&unwind_syscall));
}

std::atomic<bool> g_closed_for_fork{false};
constexpr int kForkWaitPolls = 20000;  // of 50 us: about a second

// A capture counts itself in, then checks that the unwinder is open; a fork closes it, then
// reads the counts: each side's store must be seen before its load (a Dekker pair). Rather
// than a locked instruction on every capture (two per allocation, 5 % of a traced program's
// time), the capture's side is an ordinary store and the fork's side, which is rare, makes every
// thread of the process pass a full barrier (membarrier). Where the kernel has no private
// expedited membarrier, both sides use sequentially consistent atomics.
std::atomic<bool> g_light_barrier{false};

bool register_light_barrier() {
    long commands = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (commands < 0 || !(commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

// Counts a capture in; false where the unwinder is closed for a fork (then counted out again).
// `own`: the count is the calling thread's alone, so a plain read and store can change it.
bool count_in(std::atomic<int>& in_progress, bool own) {
    if (own && g_light_barrier.load(std::memory_order_relaxed)) {
        in_progress.store(in_progress.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order
        if (!g_closed_for_fork.load(std::memory_order_relaxed)) return true;
    } else {
        in_progress.fetch_add(1);
        if (!g_closed_for_fork.load()) return true;
    }
    in_progress.fetch_sub(1, std::memory_order_release);
    return false;
}

void count_out(std::atomic<int>& in_progress, bool own) {
    if (own) in_progress.store(in_progress.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    else in_progress.fetch_sub(1, std::memory_order_release);
}
using BacktraceFn = int (*)(void**, int);
using CachingPolicyFn = int (*)(void*, int);

BacktraceFn g_backtrace = nullptr;
uintptr_t g_self_begin = 0;  // text range of libgrowtrace.so, to drop our own frames
uintptr_t g_self_end = 0;

int find_self(dl_phdr_info* info, size_t, void* data) {
    auto self = reinterpret_cast<uintptr_t>(data);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
        uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
        if (self >= begin && self < begin + ph.p_memsz) {
            g_self_begin = begin;
            g_self_end = begin + ph.p_memsz;
            return 1;
        }
    }
    return 0;
}
}  // namespace

static void* g_libunwind = nullptr;  // our handle of libunwind.so.8

bool unwinder_init() {
    void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        log_line("cannot load libunwind.so.8 (%s); tracing disabled", dlerror());
        return false;
    }
    g_backtrace = reinterpret_cast<BacktraceFn>(dlsym(lib, "unw_backtrace"));
    auto set_policy = reinterpret_cast<CachingPolicyFn>(dlsym(lib, "_ULx86_64_set_caching_policy"));
    auto* address_space = static_cast<void**>(dlsym(lib, "_ULx86_64_local_addr_space"));
    if (!g_backtrace) {
        log_line("libunwind.so.8 has no unw_backtrace; tracing disabled");
        dlclose(lib);
        return false;
    }
    g_libunwind = lib;
    // Before libunwind initialises (below), when it makes its pipe.
    redirect_unwinder_descriptors(reinterpret_cast<void*>(g_backtrace));
    // Per-thread caching would keep unwinding free of libunwind's global cache lock, which
    // every step otherwise takes (UNW_CACHE_PER_THREAD = 2). A libunwind built without
    // thread-local storage (Debian 12's) keeps the global cache and its lock.
    if (set_policy && address_space) set_policy(*address_space, 2);
    dl_iterate_phdr(find_self, reinterpret_cast<void*>(&unwinder_init));
    g_light_barrier.store(register_light_barrier());
    const char* choice = getenv(environment::kUnwind);
    cfi_set_enabled(!(choice && strcmp(choice, "libunwind") == 0));
    return true;
}

void unwinder_release() {
    if (!g_libunwind) return;
    void* inside = reinterpret_cast<void*>(g_backtrace);
    for (const char* name : {"pipe2", "read", "close", "syscall"})
        if (void* libc_definition = dlsym(g_libunwind, name)) got_redirect_in_object(inside, name, libc_definition);
    g_backtrace = nullptr;
    dlclose(g_libunwind);
    g_libunwind = nullptr;
}

// Our own frames are dropped wherever they are: the hooks at the innermost end, and
// main_then_exiting (hooks.cpp), which runs the program's main, at the outermost.
int capture_stack(uint64_t* ips, int max_frames, std::atomic<int>& in_progress, WalkMemo* memo, WalkStart start) {
    // Counted before the check: a fork that closes the unwinder after this thread's check sees
    // the count and waits for it. A thread's own state has a memo; the shared one has none.
    const bool own = memo != nullptr;
    if (!count_in(in_progress, own)) return 0;
    uint64_t raw[kMaxFrames + 8];
    int saved_errno = errno;  // the program's, which a successful malloc leaves alone
    int n = cfi_backtrace(raw, kMaxFrames + 8, memo, start);
    if (n < 0) n = g_backtrace(reinterpret_cast<void**>(raw), kMaxFrames + 8);
    errno = saved_errno;
    count_out(in_progress, own);
    int count = 0;
    for (int i = 0; i < n && count < max_frames; ++i) {
        uintptr_t ip = raw[i];
        if (ip >= g_self_begin && ip < g_self_end) continue;
        ips[count++] = ip;
    }
    return count;
}

void unwinder_close_for_fork() {
    g_closed_for_fork.store(true);
    if (g_light_barrier.load() && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
        // Cannot happen once registered; if it did, the threads' counts may not be seen yet:
        // wait for them on the safe side, as long as a capture takes at most.
        g_light_barrier.store(false);
        timespec pause{0, 10 * 1000 * 1000};
        nanosleep(&pause, nullptr);
    }
}

void unwinder_wait_for(const std::atomic<int>& in_progress) {
    for (int i = 0; i < kForkWaitPolls && in_progress.load(); ++i) {
        timespec pause{0, 50000};
        nanosleep(&pause, nullptr);
    }
}

void unwinder_open_after_fork() {
    // A child is a new process to membarrier: registered again (idempotent in the parent).
    if (g_light_barrier.load() && !register_light_barrier()) g_light_barrier.store(false);
    g_closed_for_fork.store(false, std::memory_order_release);
}

}  // namespace growtrace::preload
