#include "preload/tracer_thread.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "preload/descriptors.h"

namespace growtrace::preload {
namespace {

// How a thread of ours starts: its body, and the mask of the program thread that created it.
struct Start {
    std::atomic<bool> taken{false};
    void* (*body)(void*);
    void* arg;
    sigset_t creator_mask;
};
constexpr int kMaxStarting = 8;
Start g_starts[kMaxStarting];

// Tracer threads between their first and last instruction of ours (see program_has_ended).
std::atomic<int> g_running{0};

__thread sigset_t t_creator_mask __attribute__((tls_model("initial-exec")));

void* run(void* arg) {
    auto* start = static_cast<Start*>(arg);
    void* (*body)(void*) = start->body;
    void* body_arg = start->arg;
    t_creator_mask = start->creator_mask;
    start->taken.store(false, std::memory_order_release);
    g_running.fetch_add(1);
    void* result = body(body_arg);
    g_running.fetch_sub(1);
    return result;
}

}  // namespace

int start_tracer_thread(void* (*body)(void*), void* arg) {
    Start* start = nullptr;
    for (Start& s : g_starts) {
        if (!s.taken.exchange(true, std::memory_order_acquire)) {
            start = &s;
            break;
        }
    }
    if (!start) return EAGAIN;
    // A new thread inherits the creating thread's mask: block everything around the create.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    start->body = body;
    start->arg = arg;
    start->creator_mask = old;  // the slot is the new thread's from here: `old` restores ours
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    int rc = pthread_create(&thread, &attr, run, start);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (rc != 0) start->taken.store(false, std::memory_order_release);
    return rc;
}

void tracer_threads_forget_after_fork() {
    g_running.store(0);
    for (Start& s : g_starts) s.taken.store(false);
}

bool read_process_stat(int fd, ProcessStat& out) {
    char text[1024];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0) return false;
    text[n] = '\0';
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, the last ')' ends it.
    char* p = strrchr(text, ')');
    if (!p || p[1] != ' ' || !p[2]) return false;
    char* fields[24] = {};
    int count = 0;
    for (char* f = p + 2; *f && count < 24;) {
        fields[count++] = f;
        while (*f && *f != ' ') ++f;
        while (*f == ' ') ++f;
    }
    // Field 3 of proc(5) is fields[0]: state; 20 num_threads; 24 rss (pages).
    if (count < 22) return false;
    out.leader_state = fields[0][0];
    out.threads = strtol(fields[17], nullptr, 10);
    out.rss_pages = strtoull(fields[21], nullptr, 10);
    return true;
}

bool read_own_stat(ProcessStat& out) {
    int fd = open_for_tracer("/proc/self/stat", O_RDONLY);
    if (fd < 0) return false;
    bool read = read_process_stat(fd, out);
    close(fd);
    return read;
}

bool caller_alone_with_one_tracer_thread() {
    ProcessStat stat;
    return g_running.load() == 1 && read_own_stat(stat) && stat.threads == 2;
}

bool program_has_ended(const ProcessStat& stat) {
    // A main thread that ended while other threads run stays a zombie ('Z', 'X' while it is
    // reaped) and is still counted. Any other thread beyond ours is the program's.
    if (stat.leader_state != 'Z' && stat.leader_state != 'X') return false;
    return stat.threads - 1 <= g_running.load();
}

void end_process_for_program() {
    pthread_sigmask(SIG_SETMASK, &t_creator_mask, nullptr);
    exit(0);
}

}  // namespace growtrace::preload
