// Fixed-size byte buffers that carry encoded records from the threads that produce them to
// the writer thread. A thread fills its own buffer without any lock; only handing a full
// buffer over or getting an empty one takes the pool's mutex, once per ~64 KiB of events.
#pragma once

#include <cstddef>
#include <cstdint>

#include "preload/support/trace_state.h"

namespace growtrace::preload {

inline constexpr size_t kBufferBytes = 64 * 1024;
// 512 x 64 KiB = 32 MiB of events in flight at most before producers wait for the writer.
inline constexpr size_t kMaxBuffers = 512;

struct Buffer {
    Buffer* next;
    size_t used;
    uint64_t seq;  // order in which buffers were started: a thread's buffers are written in it
    uint32_t stream;  // the thread state that filled it (ThreadState::stream, event_merger.h)
    // What the hooks committed to it, for the trace's ledger (TraceCompactor::write_ledger).
    uint32_t allocations, frees;
    uint8_t data[kBufferBytes];

    size_t room() const { return kBufferBytes - used; }
};

// An empty buffer. When too many buffers wait for the writer, blocks until it catches up
// (back-pressure instead of unbounded memory), or returns nullptr if the writer is gone.
Buffer* pool_get();
void pool_put(Buffer* buffer);
void pool_put_list(Buffer* list);

// Full buffers in the order they were handed over. Returns how many are queued.
size_t pool_queue_full(Buffer* buffer);
Buffer* pool_take_full();  // the whole queue, oldest first
size_t pool_queued();      // how many full buffers wait in it

// The writer stopped: never block producers again.
void pool_stop_waiting();

// A new trace (the session's reset): the queued buffers, which hold the previous trace's
// events (a forked child's parent's), are recycled, and producers may wait for the writer again.
void pool_reset(SessionOrigin origin);
// Unmaps every buffer the pool holds (before the library is unloaded; none may be in use).
void pool_release();

// Lock and unlock everything around fork().
void pool_prepare_fork();
void pool_parent_after_fork();
void pool_child_after_fork();

}  // namespace growtrace::preload
