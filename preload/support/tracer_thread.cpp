#include "preload/support/tracer_thread.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <cstdlib>

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

void wait_until_thread_gone(pid_t tid) {
    for (int i = 0; i < 20000; ++i) {
        if (syscall(SYS_tgkill, getpid(), tid, 0) != 0 && errno == ESRCH) return;
        timespec pause{0, 50000};
        nanosleep(&pause, nullptr);
    }
}

int tracer_threads_running() { return g_running.load(); }

void end_process_for_program() {
    pthread_sigmask(SIG_SETMASK, &t_creator_mask, nullptr);
    exit(0);
}

}  // namespace growtrace::preload
