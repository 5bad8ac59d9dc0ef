// Stress cases for the preload library, one per mode. Every mode prints only deterministic
// lines (no pids, addresses or timings), so a test can compare the output with and without
// the tracer byte for byte, and keeps blocks whose sizes and counts are exactly known, each
// from its own noinline function (above 64 KiB per function: the analyzer's reporting floor).
//
// usage: gt_stress MODE [ARGS...]
//   threads ROUNDS PER_ROUND     ROUNDS x PER_ROUND threads start, churn, keep one 1000-byte
//                                block each (thread_keep) and exit, PER_ROUND at a time
//   fork CHILDREN                4 threads allocate while the main thread forks CHILDREN
//                                children; each child allocates, frees and exits 0
//   fork-cold CHILDREN           as fork, but the 4 threads allocate from 4096 call sites in
//                                turn: more than a stack unwinder's caches hold, so a tracer's
//                                captures keep taking its slow path (and its locks)
//   fork-exec SELF               a thread allocates while the main thread forks a child that
//                                execs SELF exec-child
//   exec-child                   keeps 100 x 1000 bytes (exec_child_keep), prints, exits 0
//   signal MILLISECONDS          a 1 ms SIGALRM handler allocates while the main thread does
//   realloc STEPS                a realloc chain growing and shrinking (realloc_chain)
//   memalign                     posix_memalign with alignments 16 B .. 2 MiB (aligned_keep)
//   exit-thread                  3 threads allocate, a 4th calls exit(7)
//   kill                         keeps 100 x 1000 bytes (keep_before_kill), waits for the
//                                tracer's flush, then SIGKILLs itself
//   dlclose PLUGIN               the plugin keeps 100 x 1000 bytes, then is dlclose'd
//   dlclose-patched PLUGIN       the same, once the plugin's calls to malloc reach another
//                                malloc than the process-wide one (an attached tracer's; at
//                                most 10 s): its blocks are traced and it is closed at once
//   churn EVENTS                 EVENTS malloc/free pairs of varied sizes from varied stacks
//   live COUNT EVENTS            keeps COUNT 64-byte blocks live while making EVENTS events
//   fds CHILDREN                 lowers RLIMIT_NOFILE to 64, opens descriptors until none is
//                                left, allocates, forks
//                                CHILDREN children that allocate and exit, closes them again
//   pthread-exit                 main registers an atexit handler, starts a worker and calls
//                                pthread_exit; the worker keeps 100 x 1000 bytes (worker_keep)
//                                and returns: the process exits 0 and the handler prints
//   pthread-exit-hang            as pthread-exit, but the atexit handler then waits for ever:
//                                only a signal ends the process
//   fork-from-thread             a second thread forks; the child allocates (child_keep) and
//                                returns from that thread, which ends it with status 0
//   fd-status                    prints the open descriptors found by fstat up to the limit
//                                (like CPython's test fd_status.py) and those in /proc/self/fd
//   pass-fds SELF                opens two descriptors and a pipe, then a child redirects its
//                                output to the pipe and execs SELF fd-status; prints its line
//   fd-watch MILLISECONDS        a thread looks at descriptors 3..63 over and over while the
//                                main thread churns; prints how many it found open (it opens none)
//
//   gt_stress after FILE MODE [ARGS...] waits until FILE exists (at most 30 s: a test attaches
//   the tracer first), then runs MODE, printing nothing more.
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <utility>
#include <vector>

namespace {

void* volatile g_sink;
std::atomic<bool> g_stop{false};

[[noreturn]] void die(const char* what) {
    fprintf(stderr, "gt_stress: %s: %s\n", what, strerror(errno));
    exit(100);
}

uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

// Allocates and frees blocks of a few sizes, `count` times.
__attribute__((noinline)) void churn(unsigned count, unsigned seed) {
    for (unsigned i = 0; i < count; ++i) {
        void* p = malloc(16 + (seed + i * 37) % 500);
        g_sink = p;
        free(p);
    }
}

void* churn_until_stopped(void*) {
    unsigned seed = 0;
    while (!g_stop.load(std::memory_order_relaxed)) churn(100, seed++);
    return nullptr;
}

// --- threads ---
std::vector<void*> g_thread_blocks;
pthread_mutex_t g_blocks_mutex = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) void* thread_keep() { return malloc(1000); }

void* short_thread(void* arg) {
    churn(200, static_cast<unsigned>(reinterpret_cast<uintptr_t>(arg)));
    void* kept = thread_keep();
    pthread_mutex_lock(&g_blocks_mutex);
    g_thread_blocks.push_back(kept);
    pthread_mutex_unlock(&g_blocks_mutex);
    return nullptr;
}

int mode_threads(int rounds, int per_round) {
    g_thread_blocks.reserve(size_t(rounds) * size_t(per_round));
    for (int r = 0; r < rounds; ++r) {
        std::vector<pthread_t> threads(static_cast<size_t>(per_round));
        for (int t = 0; t < per_round; ++t)
            if (pthread_create(&threads[size_t(t)], nullptr, short_thread, reinterpret_cast<void*>(uintptr_t(t))) != 0)
                die("pthread_create");
        for (pthread_t& t : threads) pthread_join(t, nullptr);
    }
    printf("threads: %zu threads kept one block each\n", g_thread_blocks.size());
    return 0;
}

// --- fork from a multi-threaded program ---
__attribute__((noinline)) void* child_keep() { return malloc(2000); }

int child_work() {
    std::vector<void*> kept;
    for (int i = 0; i < 50; ++i) kept.push_back(child_keep());
    churn(1000, 3);
    g_sink = kept.data();
    return 0;  // the 50 blocks stay live until exit: the analyzer samples the heap at window ends
}

// Waits for `pid`, at most `seconds`; -1 on timeout (the child is then killed).
int wait_child(pid_t pid, int seconds) {
    uint64_t deadline = now_ms() + uint64_t(seconds) * 1000;
    for (;;) {
        int status;
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (done < 0 && errno != EINTR) die("waitpid");
        if (now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(1000);
    }
}

// Waits for a forked child (at most 10 s); false, with a line, if it failed or hung.
bool child_succeeded(const char* mode, int c, pid_t pid) {
    int status = wait_child(pid, 10);
    if (status == 0) return true;
    printf("%s: child %d ended with %d%s\n", mode, c, status, status < 0 ? " (hung, killed)" : "");
    fflush(stdout);  // or the next child would inherit the line and print it again
    return false;
}

// 4096 functions, each its own call site of malloc and its own return address.
template <int N>
__attribute__((noinline)) void alloc_site() {
    void* p = malloc(16 + N % 200);
    g_sink = p;
    free(p);
}

template <int... N>
constexpr std::array<void (*)(), sizeof...(N)> sites_of(std::integer_sequence<int, N...>) {
    return {alloc_site<N>...};
}
constexpr auto kSites = sites_of(std::make_integer_sequence<int, 4096>{});

void* churn_cold_until_stopped(void*) {
    while (!g_stop.load(std::memory_order_relaxed))
        for (auto site : kSites) site();
    return nullptr;
}

int mode_fork(int children, void* (*thread_body)(void*), const char* mode) {
    pthread_t threads[4];
    for (pthread_t& t : threads) pthread_create(&t, nullptr, thread_body, nullptr);
    int failures = 0;
    fflush(stdout);
    for (int c = 0; c < children; ++c) {
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) exit(child_work());  // exit, not _exit: atexit handlers and destructors run
        if (!child_succeeded(mode, c, pid)) ++failures;
    }
    g_stop = true;
    for (pthread_t& t : threads) pthread_join(t, nullptr);
    printf("%s: %d children, %d failed\n", mode, children, failures);
    return failures ? 1 : 0;
}

// --- exec from a forked child ---
__attribute__((noinline)) void* exec_child_keep() { return malloc(1000); }

int mode_exec_child() {
    for (int i = 0; i < 100; ++i) g_sink = exec_child_keep();
    printf("exec-child: kept 100 blocks\n");
    return 0;
}

int mode_fork_exec(const char* self) {
    pthread_t thread;
    pthread_create(&thread, nullptr, churn_until_stopped, nullptr);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        churn(100, 1);
        execl(self, self, "exec-child", static_cast<char*>(nullptr));
        _exit(101);
    }
    int status = wait_child(pid, 10);
    g_stop = true;
    pthread_join(thread, nullptr);
    printf("fork-exec: child ended with %d\n", status);
    return status == 0 ? 0 : 1;
}

// --- allocation in a signal handler ---
// The handler and the main thread use different size classes, so glibc serves each from its
// own thread-cache bin: without the tracer this program does not deadlock in practice.
std::atomic<unsigned long> g_handled{0};

void on_alarm(int) {
    int saved = errno;
    void* p = malloc(40);
    g_sink = p;
    free(p);
    g_handled.fetch_add(1, std::memory_order_relaxed);
    errno = saved;
}

__attribute__((noinline)) void signal_main_work() {
    void* p = malloc(300);
    g_sink = p;
    free(p);
}

int mode_signal(int milliseconds) {
    struct sigaction action {};
    action.sa_handler = on_alarm;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &action, nullptr);
    itimerval timer{{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &timer, nullptr);
    uint64_t end = now_ms() + uint64_t(milliseconds);
    while (now_ms() < end)
        for (int i = 0; i < 100; ++i) signal_main_work();
    itimerval off{};
    setitimer(ITIMER_REAL, &off, nullptr);
    printf("signal: handler ran %s\n", g_handled.load() > 0 ? "at least once" : "never");
    return 0;
}

// --- realloc chains ---
// Grows and shrinks one block through sizes that cross the mmap threshold both ways, so it
// moves, grows in place and shrinks in place. The final size is 150000.
__attribute__((noinline)) void* realloc_chain(void* p, size_t size) { return realloc(p, size); }

int mode_realloc(int steps) {
    static const size_t kSizes[] = {100000, 200000, 80000, 300000, 70000, 1 << 20, 90000, 150000};
    constexpr int kCount = sizeof kSizes / sizeof kSizes[0];
    void* p = nullptr;
    int lost = 0;  // contents realloc did not preserve
    for (int i = 0; i < steps; ++i) {
        size_t size = kSizes[i % kCount];
        p = realloc_chain(p, size);
        if (!p) die("realloc");
        auto* bytes = static_cast<unsigned char*>(p);
        if (i > 0 && bytes[0] != static_cast<unsigned char>(i - 1)) ++lost;
        bytes[0] = static_cast<unsigned char>(i);
    }
    // End on the last size of the table.
    for (int i = steps % kCount; i != 0 && i < kCount; ++i) p = realloc_chain(p, kSizes[i]);
    g_sink = p;
    printf("realloc: %d steps, %d lost contents\n", steps, lost);
    return 0;
}

// --- realloc and reallocarray that fail: the blocks live on, whole ---
__attribute__((noinline)) unsigned char* failed_realloc_keep(size_t size) {
    auto* p = static_cast<unsigned char*>(malloc(size));
    if (!p) die("malloc");
    memset(p, 7, size);
    return p;
}

int mode_failed_realloc(int count) {
    static unsigned char* kept[1000];
    if (count > 1000) count = 1000;
    int failed = 0;
    for (int i = 0; i < count; ++i) {
        kept[i] = failed_realloc_keep(40000);
        // A petabyte: no allocator gives that.
        void* grown = i % 2 ? realloc(kept[i], size_t(1) << 50) : reallocarray(kept[i], size_t(1) << 40, 1024);
        if (grown) kept[i] = static_cast<unsigned char*>(grown);
        else ++failed;
    }
    long whole = 0;
    for (int i = 0; i < count; ++i) whole += kept[i][0] == 7 && kept[i][39999] == 7;
    printf("failed-realloc: %d of %d failed, %ld blocks whole\n", failed, count, whole);
    return 0;
}

// --- posix_memalign with large alignments ---
__attribute__((noinline)) void* aligned_keep(size_t alignment, size_t size) {
    void* p = nullptr;
    int rc = posix_memalign(&p, alignment, size);
    if (rc != 0) {
        errno = rc;
        die("posix_memalign");
    }
    if (reinterpret_cast<uintptr_t>(p) % alignment != 0) {
        fprintf(stderr, "gt_stress: misaligned block\n");
        exit(102);
    }
    return p;
}

int mode_memalign() {
    // alignments 16 .. 2 MiB; sizes 10000 + shift, sum = 19 * 10000 + (4+...+21)
    int n = 0;
    for (int shift = 4; shift <= 21; ++shift, ++n) g_sink = aligned_keep(size_t(1) << shift, 10000 + size_t(shift));
    // A bad alignment is refused with EINVAL, traced or not.
    void* p = nullptr;
    int rc = posix_memalign(&p, 24, 100);
    printf("memalign: %d aligned blocks kept, alignment 24 gives %s\n", n, rc == EINVAL ? "EINVAL" : "something else");
    return 0;
}

// --- exit from a thread while others allocate ---
void* exit_later(void*) {
    usleep(200000);
    printf("exit-thread: calling exit(7)\n");
    fflush(stdout);
    exit(7);
}

int mode_exit_thread() {
    pthread_t threads[4];
    for (int i = 0; i < 3; ++i) pthread_create(&threads[i], nullptr, churn_until_stopped, nullptr);
    pthread_create(&threads[3], nullptr, exit_later, nullptr);
    for (;;) churn(100, 5);
}

// --- SIGKILL ---
__attribute__((noinline)) void* keep_before_kill() { return malloc(1000); }

int mode_kill() {
    for (int i = 0; i < 100; ++i) g_sink = keep_before_kill();
    printf("kill: kept 100 blocks\n");
    fflush(stdout);
    usleep(600000);  // several of the tracer's 100 ms flushes
    raise(SIGKILL);
    return 0;
}

// --- dlclose with live blocks ---
// Waits until the plugin's GOT entry for malloc no longer holds the process-wide malloc.
void wait_until_redirected(void* handle) {
    auto slot = reinterpret_cast<void* (*)()>(dlsym(handle, "stress_plugin_malloc_slot"));
    void* global = dlsym(RTLD_DEFAULT, "malloc");
    uint64_t deadline = now_ms() + 10000;
    while (slot && slot() == global && now_ms() < deadline) usleep(1000);
}

int mode_dlclose(const char* plugin, bool when_patched) {
    void* handle = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        fprintf(stderr, "gt_stress: %s\n", dlerror());
        return 100;
    }
    auto keep = reinterpret_cast<void* (*)(unsigned long)>(dlsym(handle, "stress_plugin_keep"));
    if (!keep) return 100;
    if (when_patched) wait_until_redirected(handle);
    std::vector<void*> kept;
    for (int i = 0; i < 100; ++i) kept.push_back(keep(1000));
    if (dlclose(handle) != 0) return 100;
    // Something else is mapped where the library was, and more is allocated after.
    void* other = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
    churn(1000, 9);
    usleep(250000);
    if (other) dlclose(other);
    g_sink = kept.data();
    printf("dlclose: %zu blocks kept from the closed library\n", kept.size());
    return 0;
}

// --- many events, for a disk that fills up or a trace that is removed ---
__attribute__((noinline)) void churn_a(unsigned n) { churn(n, 11); }
__attribute__((noinline)) void churn_b(unsigned n) { churn(n, 13); }
// Replaces random blocks of a 256-slot working set with blocks of random sizes: addresses and
// sizes that compress badly, so the trace grows by several bytes per event.
__attribute__((noinline)) void churn_c(unsigned n) {
    static void* slots[256];
    static unsigned state = 12345;
    for (unsigned i = 0; i < n; ++i) {
        state = state * 1103515245u + 12345u;
        unsigned slot = (state >> 8) & 255;
        free(slots[slot]);
        slots[slot] = malloc(16 + ((state >> 16) % 8000));
    }
}

int mode_churn(long events) {
    unsigned long checksum = 0;
    for (long done = 0; done < events; done += 3000) {
        churn_a(1000);
        churn_b(1000);
        churn_c(1000);
        checksum += static_cast<unsigned long>(done % 7);
    }
    printf("churn: %ld events, checksum %lu\n", events, checksum);
    return 0;
}

// --- many live blocks, for the tracer's memory overhead (bench/memory_bench.py) ---
__attribute__((noinline)) void* live_keep() { return malloc(64); }

int mode_live(long count, long events) {
    std::vector<void*> kept(static_cast<size_t>(count));
    for (void*& p : kept) p = live_keep();
    usleep(300000);  // a few tracer flushes with all of them live
    churn(unsigned(events / 2), 17);
    for (void* p : kept) free(p);
    printf("live: kept %ld blocks\n", count);
    return 0;
}

// --- no descriptors left ---
int mode_fds(int children) {
    // A low limit, so running out is quick whatever the shell's limit is.
    rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max < 64 ? limit.rlim_max : 64;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) die("setrlimit");
    std::vector<int> fds;
    for (;;) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd < 0) {
            if (errno != EMFILE) die("open");
            break;
        }
        fds.push_back(fd);
    }
    churn(10000, 1);
    int failures = 0;
    fflush(stdout);
    for (int c = 0; c < children; ++c) {
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) exit(child_work());
        if (wait_child(pid, 10) != 0) ++failures;
    }
    for (int fd : fds) close(fd);
    printf("fds: ran out of descriptors, %d children, %d failed\n", children, failures);
    return failures ? 1 : 0;
}

// --- the last thread ends with pthread_exit ---
__attribute__((noinline)) void* worker_keep() { return malloc(1000); }

void say_exit_handlers_ran() { printf("pthread-exit: exit handlers ran\n"); }

void hang_in_exit_handler() {
    printf("pthread-exit: exit handler waits\n");
    fflush(stdout);
    for (;;) pause();
}

void* late_worker(void*) {
    usleep(300000);
    for (int i = 0; i < 100; ++i) g_sink = worker_keep();
    churn(1000, 23);
    printf("pthread-exit: worker done\n");
    return nullptr;
}

int mode_pthread_exit(bool hang) {
    atexit(hang ? hang_in_exit_handler : say_exit_handlers_ran);
    pthread_t worker;
    if (pthread_create(&worker, nullptr, late_worker, nullptr) != 0) die("pthread_create");
    printf("pthread-exit: main thread leaves\n");  // stays in stdio's buffer until exit() flushes it
    pthread_exit(nullptr);
}

// --- fork from a thread other than main ---
void* forking_thread(void*) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        // The child's only thread: returning ends the process (glibc calls exit(0)).
        std::vector<void*> kept;
        for (int i = 0; i < 50; ++i) kept.push_back(child_keep());
        churn(1000, 29);
        g_sink = kept.data();
        printf("fork-from-thread: child done\n");
        return nullptr;
    }
    printf("fork-from-thread: child ended with %d\n", wait_child(pid, 10));
    return nullptr;
}

int mode_fork_from_thread() {
    pthread_t thread;
    if (pthread_create(&thread, nullptr, forking_thread, nullptr) != 0) die("pthread_create");
    pthread_join(thread, nullptr);
    return 0;
}

// --- descriptors a program can see ---
int mode_fd_status() {
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > (1 << 20)) max = 1 << 20;
    const char* separator = "";
    for (int fd = 0; fd < max; ++fd) {
        struct stat st;
        if (fstat(fd, &st) != 0) continue;
        printf("%s%d", separator, fd);
        separator = ",";
    }
    printf("\n");
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) die("opendir");
    std::vector<int> listed;
    while (dirent* entry = readdir(dir))
        if (entry->d_name[0] != '.' && atoi(entry->d_name) != dirfd(dir)) listed.push_back(atoi(entry->d_name));
    closedir(dir);
    std::sort(listed.begin(), listed.end());
    separator = "";
    for (int fd : listed) {
        printf("%s%d", separator, fd);
        separator = ",";
    }
    printf("\n");
    return 0;
}

int mode_pass_fds(const char* self) {
    int null_in = open("/dev/null", O_RDONLY);
    int null_err = open("/dev/null", O_WRONLY);
    int out[2];
    if (null_in < 0 || null_err < 0 || pipe(out) != 0) die("open");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        // What subprocess.Popen(pass_fds=...) does: the passed descriptors stay, the rest go.
        dup2(null_in, 0);
        dup2(out[1], 1);
        dup2(null_err, 2);
        for (int fd = 3; fd < 1024; ++fd)
            if (fd != null_in && fd != null_err && fd != out[1]) close(fd);
        execl(self, self, "fd-status", static_cast<char*>(nullptr));
        _exit(101);
    }
    close(out[1]);
    char line[512] = {};
    size_t used = 0;
    for (ssize_t n; used < sizeof line - 1 && (n = read(out[0], line + used, sizeof line - 1 - used)) > 0;)
        used += static_cast<size_t>(n);
    int status = wait_child(pid, 10);
    printf("pass-fds: passed %d,%d,%d; the child sees %s", null_in, out[1], null_err, line);
    return status == 0 ? 0 : 1;
}

// Any descriptor found here that was not open before is someone else's: the program opens
// none while it watches.
std::atomic<bool> g_watching{true};

void* watch_descriptors(void* seen) {
    bool open_before[64];
    for (int fd = 0; fd < 64; ++fd) open_before[fd] = fcntl(fd, F_GETFD) >= 0;
    long found = 0;
    while (g_watching.load(std::memory_order_relaxed))
        for (int fd = 3; fd < 64; ++fd)
            if (!open_before[fd] && fcntl(fd, F_GETFD) >= 0) ++found;
    *static_cast<long*>(seen) = found;
    return nullptr;
}

int mode_fd_watch(long milliseconds) {
    long seen = 0;
    pthread_t watcher;
    if (pthread_create(&watcher, nullptr, watch_descriptors, &seen) != 0) die("pthread_create");
    for (uint64_t end = now_ms() + static_cast<uint64_t>(milliseconds); now_ms() < end;) churn(3000, 5);
    g_watching.store(false);
    pthread_join(watcher, nullptr);
    printf("fd-watch: %s\n", seen ? "found descriptors the program did not open" : "no descriptor but its own");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: gt_stress MODE [ARGS...]\n");
        return 64;
    }
    if (!strcmp(argv[1], "after") && argc > 3) {
        uint64_t deadline = now_ms() + 30000;
        while (access(argv[2], F_OK) != 0 && now_ms() < deadline) usleep(10000);
        argc -= 2;
        argv += 2;
    }
    const char* mode = argv[1];
    auto arg = [&](int i, long fallback) { return argc > i ? atol(argv[i]) : fallback; };
    if (!strcmp(mode, "threads")) return mode_threads(int(arg(2, 20)), int(arg(3, 8)));
    if (!strcmp(mode, "fork")) return mode_fork(int(arg(2, 20)), churn_until_stopped, "fork");
    if (!strcmp(mode, "fork-cold")) return mode_fork(int(arg(2, 20)), churn_cold_until_stopped, "fork-cold");
    if (!strcmp(mode, "fork-exec") && argc > 2) return mode_fork_exec(argv[2]);
    if (!strcmp(mode, "exec-child")) return mode_exec_child();
    if (!strcmp(mode, "signal")) return mode_signal(int(arg(2, 1000)));
    if (!strcmp(mode, "realloc")) return mode_realloc(int(arg(2, 1000)));
    if (!strcmp(mode, "failed-realloc")) return mode_failed_realloc(int(arg(2, 200)));
    if (!strcmp(mode, "memalign")) return mode_memalign();
    if (!strcmp(mode, "exit-thread")) return mode_exit_thread();
    if (!strcmp(mode, "kill")) return mode_kill();
    if (!strcmp(mode, "dlclose") && argc > 2) return mode_dlclose(argv[2], false);
    if (!strcmp(mode, "dlclose-patched") && argc > 2) return mode_dlclose(argv[2], true);
    if (!strcmp(mode, "churn")) return mode_churn(arg(2, 3000000));
    if (!strcmp(mode, "live")) return mode_live(arg(2, 1000000), arg(3, 0));
    if (!strcmp(mode, "fds")) return mode_fds(int(arg(2, 3)));
    if (!strcmp(mode, "pthread-exit")) return mode_pthread_exit(false);
    if (!strcmp(mode, "pthread-exit-hang")) return mode_pthread_exit(true);
    if (!strcmp(mode, "fork-from-thread")) return mode_fork_from_thread();
    if (!strcmp(mode, "fd-status")) return mode_fd_status();
    if (!strcmp(mode, "pass-fds") && argc > 2) return mode_pass_fds(argv[2]);
    if (!strcmp(mode, "fd-watch")) return mode_fd_watch(arg(2, 1000));
    fprintf(stderr, "gt_stress: unknown mode %s\n", mode);
    return 64;
}
