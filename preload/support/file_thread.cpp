#include "preload/support/file_thread.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "preload/support/clock.h"
#include "preload/support/recursion_guard.h"
#include "preload/support/tracer_thread.h"

namespace growtrace::preload {
namespace {

enum class State { Stopped, Starting, Serving, Stopping };

pthread_mutex_t g_one_at_a_time = PTHREAD_MUTEX_INITIALIZER;  // held by a caller for its work
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;          // guards everything below
pthread_cond_t g_changed = PTHREAD_COND_INITIALIZER;          // state, work posted or done
State g_state = State::Stopped;
int (*g_work)(void*) = nullptr;  // posted and not yet done (null again once it is)
void* g_arg = nullptr;
int g_result = 0;
std::atomic<pid_t> g_tid{0};
constexpr unsigned kStartWaitMs = 1000;  // for the thread to say whether it serves

// Leaves the program's table for an empty one of our own, without holding a reference to any of
// the program's files even for a moment (the kernel copies none of the numbers it is asked to
// close). Numbers 0 to 2 then hold /dev/null, so that nothing of ours is ever taken for a
// standard stream by code that writes to one on this thread.
bool take_own_table() {
    if (syscall(SYS_close_range, 0u, ~0u, CLOSE_RANGE_UNSHARE) != 0) return false;
    for (int fd = 0; fd < 3; ++fd)
        if (open("/dev/null", O_RDWR | O_CLOEXEC) != fd) break;
    return true;
}

void set_state(State state) {
    g_state = state;
    pthread_cond_broadcast(&g_changed);
}

void* serve(void*) {
    t_in_tracer = true;  // nothing this thread allocates is the program's
    prctl(PR_SET_NAME, "growtrace-fd", 0, 0, 0);
    g_tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
    const bool own = take_own_table();
    pthread_mutex_lock(&g_mutex);
    set_state(own && g_state == State::Starting ? State::Serving : State::Stopped);
    while (g_state == State::Serving) {
        if (!g_work) {
            pthread_cond_wait(&g_changed, &g_mutex);
            continue;
        }
        int (*work)(void*) = g_work;
        void* arg = g_arg;
        pthread_mutex_unlock(&g_mutex);
        int result = work(arg);
        pthread_mutex_lock(&g_mutex);
        g_result = result;
        g_work = nullptr;
        pthread_cond_broadcast(&g_changed);
    }
    set_state(State::Stopped);
    pthread_mutex_unlock(&g_mutex);
    return nullptr;
}

}  // namespace

void file_thread_start() {
    pthread_mutex_lock(&g_mutex);
    if (g_state != State::Stopped) {
        pthread_mutex_unlock(&g_mutex);
        return;
    }
    g_state = State::Starting;
    g_tid.store(0);
    if (start_tracer_thread(serve, nullptr) != 0) {
        g_state = State::Stopped;
    } else {
        timespec limit = after_ms(kStartWaitMs);
        while (g_state == State::Starting)
            if (pthread_cond_timedwait(&g_changed, &g_mutex, &limit) != 0) break;
        // Still starting (a stalled machine): it serves once it is up; until then callers work
        // in place.
    }
    pthread_mutex_unlock(&g_mutex);
}

void file_thread_stop() {
    pthread_mutex_lock(&g_one_at_a_time);  // no work in flight
    pthread_mutex_lock(&g_mutex);
    if (g_state == State::Starting || g_state == State::Serving) {
        set_state(State::Stopping);
        while (g_state != State::Stopped) pthread_cond_wait(&g_changed, &g_mutex);
    }
    pthread_mutex_unlock(&g_mutex);
    pthread_mutex_unlock(&g_one_at_a_time);
    if (pid_t tid = g_tid.exchange(0)) wait_until_thread_gone(tid);
}

int on_file_thread(int (*work)(void*), void* arg) {
    pthread_mutex_lock(&g_one_at_a_time);
    pthread_mutex_lock(&g_mutex);
    if (g_state != State::Serving) {
        pthread_mutex_unlock(&g_mutex);
        int result = work(arg);
        pthread_mutex_unlock(&g_one_at_a_time);
        return result;
    }
    g_work = work;
    g_arg = arg;
    pthread_cond_broadcast(&g_changed);
    while (g_work) pthread_cond_wait(&g_changed, &g_mutex);
    int result = g_result;
    pthread_mutex_unlock(&g_mutex);
    pthread_mutex_unlock(&g_one_at_a_time);
    return result;
}

void file_thread_forget_after_fork() {
    pthread_mutex_init(&g_one_at_a_time, nullptr);
    pthread_mutex_init(&g_mutex, nullptr);
    pthread_cond_init(&g_changed, nullptr);
    g_state = State::Stopped;
    g_work = nullptr;
    g_tid.store(0);
}

}  // namespace growtrace::preload
