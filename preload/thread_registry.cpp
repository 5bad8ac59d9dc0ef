#include "preload/thread_registry.h"

#include <cstdlib>
#include <new>

#include "preload/clock.h"
#include "preload/python/python_frames.h"
#include "preload/recursion_guard.h"
#include "preload/writer.h"

namespace growtrace::preload {

constinit ThreadState g_late;
std::atomic<uint32_t> g_thread_epoch{0};
__thread ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;
__thread uint32_t t_tid __attribute__((tls_model("initial-exec"))) = 0;

namespace {

pthread_key_t g_thread_key;
pthread_mutex_t g_registry_mutex = PTHREAD_MUTEX_INITIALIZER;
ThreadState* g_threads = nullptr;

void on_thread_exit(void* arg) {
    auto* ts = static_cast<ThreadState*>(arg);
    RecursionGuard guard;
    if (current_tid() == static_cast<uint32_t>(g_session.pid())) writer_note_main_thread_ended();
    lock_current(ts);
    Buffer* b = ts->buffer;
    ts->buffer = nullptr;
    ts->exited = true;
    unlock(ts);
    if (b && b->used) pool_queue_full(b);
    else if (b) pool_put(b);
    t_state = kThreadGone;
}

void free_thread_state(ThreadState* ts) {
    free(ts->python_nodes);
    free(ts);
}

}  // namespace

// The buffer goes back to the pool (its records are of the earlier trace).
void start_afresh(ThreadState* ts) {
    if (ts->buffer) pool_put(ts->buffer);
    ts->buffer = nullptr;
    ts->holding_free = false;
    ts->run_tid = 0;
    ts->forget_stacks();
    ts->epoch = g_thread_epoch.load(std::memory_order_acquire);
}

ThreadState* new_thread_state() {
    auto* ts = static_cast<ThreadState*>(calloc(1, sizeof(ThreadState)));  // untraced: guard held
    if (!ts) return nullptr;
    new (ts) ThreadState();
    if (python::present()) {
        void* memo = calloc(1, sizeof(StackTreeMemo<8192>));
        if (memo) ts->python_nodes = new (memo) StackTreeMemo<8192>();
    }
    ts->last_ticks = now_ticks();
    ts->epoch = g_thread_epoch.load(std::memory_order_acquire);
    pthread_mutex_lock(&g_registry_mutex);
    ts->next = g_threads;
    g_threads = ts;
    pthread_mutex_unlock(&g_registry_mutex);
    pthread_setspecific(g_thread_key, ts);
    return ts;
}


bool thread_registry_init() { return pthread_key_create(&g_thread_key, on_thread_exit) == 0; }

void thread_registry_collect(void (*take)(Buffer*)) {
    pthread_mutex_lock(&g_registry_mutex);
    ThreadState** link = &g_threads;
    while (ThreadState* ts = *link) {
        // A thread writing right now (or blocked for a free buffer) is skipped, not waited for;
        // so is one that may take back the free it just wrote.
        if (ts->busy.exchange(true, std::memory_order_acquire)) {
            link = &ts->next;
            continue;
        }
        if (ts->epoch != g_thread_epoch.load(std::memory_order_acquire)) start_afresh(ts);
        if (ts->holding_free) {
            unlock(ts);
            link = &ts->next;
            continue;
        }
        Buffer* b = ts->buffer;
        if (b && b->used) ts->buffer = nullptr;
        else b = nullptr;
        bool gone = ts->exited;
        unlock(ts);
        if (b) take(b);
        if (gone) {
            *link = ts->next;
            free_thread_state(ts);
        } else {
            link = &ts->next;
        }
    }
    pthread_mutex_unlock(&g_registry_mutex);
    if (!g_late.busy.exchange(true, std::memory_order_acquire)) {
        if (g_late.epoch != g_thread_epoch.load(std::memory_order_acquire)) start_afresh(&g_late);
        Buffer* b = g_late.holding_free ? nullptr : g_late.buffer;
        if (b && b->used) g_late.buffer = nullptr;
        else b = nullptr;
        g_late.run_tid = 0;
        unlock(&g_late);
        if (b) take(b);
    }
}

void thread_registry_reset(SessionOrigin origin) {
    g_thread_epoch.fetch_add(1, std::memory_order_acq_rel);
    if (origin != SessionOrigin::Forked) return;
    pthread_mutex_lock(&g_registry_mutex);
    ThreadState* mine = (t_state && t_state != kThreadGone) ? t_state : nullptr;
    for (ThreadState* ts = g_threads; ts;) {
        ThreadState* next = ts->next;
        if (ts != mine) {
            if (ts->buffer) pool_put(ts->buffer);
            free_thread_state(ts);
        }
        ts = next;
    }
    g_threads = mine;
    if (mine) {
        mine->next = nullptr;
        mine->busy.store(false);
    }
    g_late.busy.store(false);
    t_tid = 0;
    pthread_mutex_unlock(&g_registry_mutex);
}

void thread_registry_prepare_fork() {
    pthread_mutex_lock(&g_registry_mutex);
    unwinder_close_for_fork();
    // The forking thread's own count is not waited for: it is not unwinding, unless it forks
    // from a signal handler that interrupted a capture, which resumes after the fork.
    ThreadState* mine = t_state;
    for (ThreadState* ts = g_threads; ts; ts = ts->next)
        if (ts != mine) unwinder_wait_for(ts->unwinding);
    unwinder_wait_for(g_late.unwinding);
}

void thread_registry_parent_after_fork() {
    unwinder_open_after_fork();
    pthread_mutex_unlock(&g_registry_mutex);
}

void thread_registry_child_after_fork() {
    unwinder_open_after_fork();
    pthread_mutex_unlock(&g_registry_mutex);
}

}  // namespace growtrace::preload
