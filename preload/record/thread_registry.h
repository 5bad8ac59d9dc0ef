// The thread registry: each program thread's recording state (its buffer, the deltas of its
// last record, its previous stacks and memos), found through TLS, and the list the writer
// walks every tick to collect the threads' buffers. A state is created by the thread's first
// event and retired by the writer after the thread's end.
#pragma once

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "preload/record/event_buffer.h"
#include "preload/cpython/python_frames.h"
#include "preload/support/trace_state.h"
#include "preload/capture/stack_tree.h"
#include "preload/capture/unwinder.h"

namespace growtrace::preload {

struct ThreadState {
    std::atomic<bool> busy{false};  // held by the owner while writing, by the writer while taking
    std::atomic<int> unwinding{0};  // native stack captures under way (unwinder.h: fork waits)
    // Held busy while blocked for a free buffer (back-pressure). Its event's time is read only
    // once it has one, so the writer may count it caught up without waiting for it: the writer
    // is what it waits for (thread_registry_collect).
    std::atomic<bool> awaiting_buffer{false};
    uint32_t epoch = 0;  // the trace its buffer and stacks belong to (g_thread_epoch)
    // Names this state's buffers for the writer's merge (event_merger.h); never reused. The
    // states that threads share after their end (g_late) are stream 0.
    uint32_t stream = 0;
    uint64_t created_ticks = 0;  // every event of this state is later
    uint64_t lost = 0;           // events not recorded for want of a buffer (the trace's ledger)
    bool exited = false;
    // A free was recorded that the thread may take back (FreeBeforeResize): the writer leaves
    // its buffer until it is settled.
    bool holding_free = false;
    Buffer* buffer = nullptr;
    uint64_t last_ticks = 0;
    uint64_t last_addr = 0;
    uint32_t run_tid = 0;  // thread of the current run in `buffer`
    ThreadState* next = nullptr;

    // The previous native (or merged) stack of this thread, outermost frame first, with its
    // node ids. Consecutive allocations share most of their stack; only the part below the
    // common prefix needs lookups.
    struct StackCache {
        int count = 0;
        uint64_t frames[kMaxFrames + python::kMaxPythonFrames] = {};
        uint32_t ids[kMaxFrames + python::kMaxPythonFrames] = {};
    };
    StackCache stack;
    WalkMemo walk;  // the previous native walk (cfi_unwinder.h); unused in the shared g_late
    // Recent stack-tree lookups. Python programs go through tens of thousands of distinct
    // stack nodes, so a CPython process's threads get a large memo (128 KiB, allocated with
    // the state); other threads keep to 16 KiB, which native programs with many threads pay.
    StackTreeMemo<1024> nodes;
    StackTreeMemo<8192>* python_nodes = nullptr;
    python::LocationMemo locations;  // recent Python frame locations
    // The same idea for Python frame locations: (code, offset) -> tagged frame id.
    int prev_py_count = 0;
    python::FrameRef prev_py[python::kMaxPythonFrames] = {};
    uint64_t prev_py_tagged[python::kMaxPythonFrames] = {};
    // The previous Python-only stack (PEP 445 allocations, most of a Python program's),
    // outermost first: its frames as capture_since() remembers them, with their frame ids and
    // node ids, so only the frames above the unchanged part are interned.
    struct PythonStackCache {
        python::StackMemory stack;  // its frames; stack.count frames have node ids
        uint64_t tags[python::kMaxPythonFrames] = {};  // tagged frame ids (one per line)
        uint32_t ids[python::kMaxPythonFrames] = {};
    };
    PythonStackCache python_stack;

    void forget_stacks() { stack.count = prev_py_count = python_stack.stack.count = 0; }
};

inline ThreadState* const kThreadGone = reinterpret_cast<ThreadState*>(uintptr_t{1});

// Events of threads whose thread-exit destructor already ran (other destructors may still
// allocate); shared, so its runs name their thread each time.
extern constinit ThreadState g_late;
// The trace the threads' states belong to, counted up by each new trace (fork, attach): a
// state of an earlier trace is made afresh by whoever locks it next, its owner or the
// writer, so a new trace never waits for a thread nor takes a record of the old one.
extern std::atomic<uint32_t> g_thread_epoch;
extern __thread ThreadState* t_state __attribute__((tls_model("initial-exec")));
extern __thread uint32_t t_tid __attribute__((tls_model("initial-exec")));

inline uint32_t current_tid() {
    if (!t_tid) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
    return t_tid;
}

inline void lock(ThreadState* ts) {
    while (ts->busy.exchange(true, std::memory_order_acquire)) __builtin_ia32_pause();
}
inline void unlock(ThreadState* ts) { ts->busy.store(false, std::memory_order_release); }

// Registers the calling thread. nullptr if there is no memory for its state.
ThreadState* new_thread_state();

// The calling thread's state (made by its first event). nullptr if none can be had.
inline ThreadState* my_state() {
    ThreadState* ts = t_state;
    if (ts == nullptr) ts = t_state = new_thread_state();
    return ts == kThreadGone ? &g_late : ts;
}

// Called with the state locked: its buffer's records and its stacks' node ids belong to an
// earlier trace; they are dropped.
void start_afresh(ThreadState* ts);

inline void lock_current(ThreadState* ts) {
    lock(ts);
    if (ts->epoch != g_thread_epoch.load(std::memory_order_acquire)) start_afresh(ts);
}

// The calling thread's state, locked. nullptr if none can be had.
inline ThreadState* lock_my_state() {
    ThreadState* ts = my_state();
    if (ts) lock_current(ts);
    return ts;
}

// Once per process: the key whose destructor retires a thread's state.
bool thread_registry_init();
// Deletes the key thread_registry_init() created: before the library is unloaded.
void thread_registry_release();

// What the writer learns of each thread state when it collects their buffers.
struct CollectSink {
    // A state's current buffer, handed over.
    void (*take)(Buffer* buffer);
    // Every event of `stream` up to `caught_up_to` ticks has been handed over (taken, or
    // queued full before); `gone`: the thread ended and no event of it will follow.
    void (*note)(uint32_t stream, uint64_t caught_up_to, bool gone);
};

// For the writer: hands every thread's pending buffer to `sink.take` and what is known of its
// events to `sink.note`, and recycles the states of threads that have exited. A thread in the
// middle of an event (or of a realloc whose free it may take back) is waited for a moment,
// then left for the next collection: its events stay where they are, and its note says only
// what was true before. Returns the events the hooks could not record since the last call.
uint64_t thread_registry_collect(const CollectSink& sink);

// A new trace (the session's reset): the epoch moves on, so every state drops its buffer's
// records and forgets its stacks, whose node ids belong to the previous trace, when it is
// next locked. In a forked child only the forking thread exists: the others' states (maybe
// locked mid-event) are freed.
void thread_registry_reset(SessionOrigin origin);

// Takes the registry's lock and waits for the captures under way in other threads
// (unwinder.h); the unwinder stays closed until after the fork.
void thread_registry_prepare_fork();
void thread_registry_parent_after_fork();
void thread_registry_child_after_fork();

}  // namespace growtrace::preload
