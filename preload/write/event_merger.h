// Puts the threads' events into one time order before the compactor matches them.
//
// Each thread writes its events into buffers of its own, timed by the clock read once the
// event's place is taken (clock.h, event_ticks), and the writer receives those buffers in any
// order: a consumer thread's buffer full of frees may arrive before the producer's buffer that
// holds the allocations. A free ends the allocation at its address that came last before it;
// which one that is can only be known once every allocation before the free has arrived, from
// every thread. So the merger hands events on in time order, and only up to the time that every
// thread has caught up with: thread_registry_collect tells, for each thread, a time up to which
// all its events have been handed over (its watermark). Events after it wait in their buffers
// for a later cycle. Nothing is decided by age or by a timeout, so however late a buffer
// arrives (a slow writer, a loaded machine, a stalled thread) no free is ever lost.
//
// One stream per thread state (ThreadState::stream); a stream's events are in time order
// within it. The output switches threads as the merged order does (TraceCompactor writes a
// Thread record at each switch).
#pragma once

#include <cstddef>
#include <cstdint>

#include "preload/record/event_buffer.h"
#include "preload/write/trace_compactor.h"

namespace growtrace::preload {

class EventMerger {
public:
    using Release = void (*)(Buffer*);

    // A buffer of stream `buffer->stream`; a stream's buffers may be added in any order (they
    // are read by their seq).
    void add(Buffer* buffer);
    // Every event of `stream` up to `caught_up_to` has been added; `gone`: no more will be.
    void note(uint32_t stream, uint64_t caught_up_to, bool gone);
    // Hands on, in time order, every event up to the time all streams have caught up with
    // (all of them when `final`), and gives each buffer read to its end to `release`.
    void merge(TraceCompactor& out, bool final, Release release);
    // A new trace: every buffer held is released unread.
    void reset(Release release);

    size_t buffers_held() const;

private:
    // An event whose time places it in the merge (Alloc, Free, or a thread event).
    struct Event {
        uint8_t kind = 0;
        uint32_t tid = 0;
        uint64_t ticks = 0, addr = 0, size = 0, stack = 0;
        const uint8_t* rest = nullptr;  // a thread event's payload after its dticks
        size_t rest_size = 0;
    };
    struct Stream {
        uint32_t id = 0;
        bool noted = false;  // a watermark is known (a stream first seen in a buffer has none)
        bool gone = false;
        uint64_t caught_up = 0;
        Buffer* head = nullptr;  // unread buffers, by seq, linked through `next`
        Buffer* tail = nullptr;
        size_t offset = 0;  // read position in head
        // Decoding state: the run's thread, clock and address (deltas are relative to them).
        uint32_t tid = 0;
        uint64_t ticks = 0, addr = 0;
        bool has_event = false;
        Event event;
    };

    Stream* find(uint32_t id);
    Stream* find_or_add(uint32_t id);
    // Forgets the streams of threads that ended, once everything of theirs is merged.
    void remove_finished();
    // Reads `s` up to its next timed event (handing untimed records to `out` on the way).
    void fill(Stream& s, TraceCompactor& out, Release release);
    static void deliver(const Event& e, TraceCompactor& out);
    uint64_t limit(bool final) const;
    // The heap of streams with an event due, by that event's time.
    bool earlier(uint32_t a, uint32_t b) const;
    void sift_down(size_t i);
    void sift_up(size_t i);

    Stream* streams_ = nullptr;  // sorted by id (ids only grow: a new one goes at the end)
    size_t count_ = 0, capacity_ = 0;
    uint32_t* heap_ = nullptr;
    size_t heap_size_ = 0, heap_capacity_ = 0;
};

}  // namespace growtrace::preload
