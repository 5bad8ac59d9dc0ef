#include "preload/record/thread_registry.h"

#include <cstdlib>
#include <ctime>
#include <new>

#include "preload/support/clock.h"
#include "preload/cpython/python_frames.h"
#include "preload/support/recursion_guard.h"
#include "preload/record/writer_doorbell.h"

namespace growtrace::preload {

constinit ThreadState g_late;
std::atomic<uint32_t> g_thread_epoch{0};
__thread ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;
__thread uint32_t t_tid __attribute__((tls_model("initial-exec"))) = 0;

namespace {

pthread_key_t g_thread_key;
pthread_mutex_t g_registry_mutex = PTHREAD_MUTEX_INITIALIZER;
ThreadState* g_threads = nullptr;
uint32_t g_next_stream = 1;  // under g_registry_mutex; 0 is g_late's

// How long a collection waits for a thread in the middle of an event before leaving it for the
// next one: an event takes a microsecond or so. A thread preempted inside one waits in another
// core's run queue, where yielding this core does not reach it; a short sleep leaves this core
// idle, and the scheduler pulls a waiting thread onto an idle core at once. Up to 2 ms a
// collection, for all threads together (it holds the registry's lock, which a new thread's
// first event takes): left for the next collection, a thread holds every other thread's
// events back in the merger.
constexpr int kSpinsForBusyThread = 2000;
constexpr int kNapsPerCollection = 40;
constexpr long kNapNs = 50'000;

// Locks `ts` for the writer, waiting a moment for a thread that is writing an event or may
// take back the free it just wrote, napping while the collection's `naps_left` last. False:
// left for the next collection.
bool lock_for_collection(ThreadState* ts, int& naps_left) {
    for (int attempt = 0;; ++attempt) {
        if (!ts->busy.exchange(true, std::memory_order_acquire)) {
            if (!ts->holding_free) return true;
            unlock(ts);
        } else if (ts->awaiting_buffer.load()) {
            return false;  // it waits for this thread: never wait for it
        }
        if (attempt < kSpinsForBusyThread) {
            __builtin_ia32_pause();
            continue;
        }
        if (naps_left <= 0) return false;
        --naps_left;
        timespec nap{0, kNapNs};
        nanosleep(&nap, nullptr);
    }
}

// Called with `ts` locked by the writer: hands over its buffer; returns its lost events.
uint64_t hand_over(ThreadState* ts, const CollectSink& sink, uint64_t now) {
    if (ts->epoch != g_thread_epoch.load(std::memory_order_acquire)) start_afresh(ts);
    Buffer* b = ts->buffer;
    if (b && b->used) ts->buffer = nullptr;
    else b = nullptr;
    if (ts == &g_late) ts->run_tid = 0;  // the shared state's next event names its thread
    const uint64_t lost = ts->lost;
    ts->lost = 0;
    const bool gone = ts->exited;
    const uint32_t stream = ts->stream;
    unlock(ts);
    if (b) sink.take(b);
    sink.note(stream, now, gone);
    return lost;
}

void on_thread_exit(void* arg) {
    auto* ts = static_cast<ThreadState*>(arg);
    RecursionGuard guard;
    if (current_tid() == static_cast<uint32_t>(g_traced_pid.load(std::memory_order_relaxed))) ring_main_thread_ended();
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
    ts->last_ticks = ts->created_ticks = now_ticks();
    ts->epoch = g_thread_epoch.load(std::memory_order_acquire);
    pthread_mutex_lock(&g_registry_mutex);
    ts->stream = g_next_stream++;
    ts->next = g_threads;
    g_threads = ts;
    pthread_mutex_unlock(&g_registry_mutex);
    pthread_setspecific(g_thread_key, ts);
    return ts;
}


bool thread_registry_init() { return pthread_key_create(&g_thread_key, on_thread_exit) == 0; }

// No destructor of ours runs for the key after this (glibc skips deleted keys' values).
void thread_registry_release() { pthread_key_delete(g_thread_key); }

uint64_t thread_registry_collect(const CollectSink& sink) {
    uint64_t lost = 0;
    pthread_mutex_lock(&g_registry_mutex);
    // Read after the registry is locked: a thread that registers later reads its events' times
    // later still; one whose lock is taken below writes its next events after this time.
    const uint64_t now = collection_ticks();
    int naps_left = kNapsPerCollection;
    ThreadState** link = &g_threads;
    while (ThreadState* ts = *link) {
        if (lock_for_collection(ts, naps_left)) {
            const bool gone = ts->exited;
            lost += hand_over(ts, sink, now);
            if (gone) {
                *link = ts->next;
                free_thread_state(ts);
                continue;
            }
        } else {
            // Waiting for a buffer, it reads its next event's time once it has one.
            sink.note(ts->stream, ts->awaiting_buffer.load() ? now : ts->created_ticks, false);
        }
        link = &ts->next;
    }
    pthread_mutex_unlock(&g_registry_mutex);
    if (lock_for_collection(&g_late, naps_left)) lost += hand_over(&g_late, sink, now);
    else sink.note(g_late.stream, g_late.awaiting_buffer.load() ? now : 0, false);
    return lost;
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
