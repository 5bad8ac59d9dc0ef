#include "preload/write/event_merger.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "format/trace_format.h"
#include "format/record_codec.h"
#include "format/records.h"
#include "format/varint.h"

namespace growtrace::preload {
namespace {

using format::RecordKind;

constexpr uint64_t kNoLimit = ~uint64_t{0};

bool is_thread_event(uint8_t kind) {
    switch (static_cast<RecordKind>(kind)) {
        case RecordKind::CacheCreate:
        case RecordKind::CacheInsert:
        case RecordKind::TypeCreate:
        case RecordKind::Collection:
        case RecordKind::Container:
            return true;
        default:
            return false;
    }
}

// A varint of the threads' own buffers, which hold nothing but what the hot path encoded: the
// bounds-checked Cursor is for files. (Alloc and Free, one per event, are most of the input.)
inline uint64_t take_varint(const uint8_t*& p) {
    uint64_t v = *p & 0x7fu;
    for (unsigned shift = 7; *p++ & 0x80; shift += 7) v |= uint64_t{*p & 0x7fu} << shift;
    return v;
}

// Grows `array` (of `capacity` elements) to hold at least `needed`. The writer's thread runs with
// the recursion guard held: what it allocates is the tracer's own.
template <typename T>
bool reserve(T*& array, size_t& capacity, size_t needed) {
    if (needed <= capacity) return true;
    size_t grown = capacity ? capacity * 2 : 64;
    while (grown < needed) grown *= 2;
    auto* bigger = static_cast<T*>(realloc(array, grown * sizeof(T)));
    if (!bigger) return false;
    array = bigger;
    capacity = grown;
    return true;
}

}  // namespace

EventMerger::Stream* EventMerger::find(uint32_t id) {
    size_t lo = 0, hi = count_;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (streams_[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < count_ && streams_[lo].id == id ? &streams_[lo] : nullptr;
}

EventMerger::Stream* EventMerger::find_or_add(uint32_t id) {
    if (Stream* s = find(id)) return s;
    if (!reserve(streams_, capacity_, count_ + 1)) return nullptr;
    size_t at = count_;
    while (at > 0 && streams_[at - 1].id > id) --at;  // ids mostly come in increasing order
    memmove(static_cast<void*>(&streams_[at + 1]), &streams_[at], (count_ - at) * sizeof(Stream));
    new (&streams_[at]) Stream();
    streams_[at].id = id;
    ++count_;
    return &streams_[at];
}

void EventMerger::add(Buffer* buffer) {
    Stream* s = find_or_add(buffer->stream);
    if (!s) return;  // no memory for a stream: cannot happen short of an exhausted process
    buffer->next = nullptr;
    if (!s->tail) {
        s->head = s->tail = buffer;
        s->offset = 0;
        return;
    }
    if (s->tail->seq < buffer->seq) {
        s->tail->next = buffer;
        s->tail = buffer;
        return;
    }
    // Out of order: a collection takes a thread's current buffer before the full ones it
    // queued earlier. Inserted by seq; before the head only if nothing of it has been read (a
    // head partly read came before anything that arrives later).
    if (buffer->seq < s->head->seq && s->offset == 0 && !s->has_event) {
        buffer->next = s->head;
        s->head = buffer;
        return;
    }
    Buffer** link = &s->head->next;
    while (*link && (*link)->seq < buffer->seq) link = &(*link)->next;
    buffer->next = *link;
    *link = buffer;
    if (!buffer->next) s->tail = buffer;
}

void EventMerger::note(uint32_t stream, uint64_t caught_up_to, bool gone) {
    Stream* s = find_or_add(stream);
    if (!s) return;
    if (!s->noted || caught_up_to > s->caught_up) s->caught_up = caught_up_to;
    s->noted = true;
    s->gone = s->gone || gone;
}

uint64_t EventMerger::limit(bool final) const {
    if (final) return kNoLimit;
    uint64_t limit = kNoLimit;
    // A stream never noted belongs to a thread that registered after the last collection had
    // begun: its events are all later than every watermark noted then.
    for (size_t i = 0; i < count_; ++i)
        if (streams_[i].noted && !streams_[i].gone && streams_[i].caught_up < limit) limit = streams_[i].caught_up;
    return limit;
}

void EventMerger::fill(Stream& s, TraceCompactor& out, Release release) {
    s.has_event = false;
    while (s.head) {
        Buffer* b = s.head;
        if (s.offset >= b->used) {
            s.head = b->next;
            if (!s.head) s.tail = nullptr;
            s.offset = 0;
            release(b);
            continue;
        }
        const uint8_t* p = b->data + s.offset;
        const uint8_t kind = *p++;
        const uint64_t length = take_varint(p);
        const uint8_t* payload = p;
        s.offset = static_cast<size_t>(payload + length - b->data);
        const uint8_t* q = payload;
        Event& e = s.event;
        switch (static_cast<RecordKind>(kind)) {
            case RecordKind::Thread: {
                format::records::Thread run;
                format::read_trusted(q, run);
                s.tid = static_cast<uint32_t>(run.tid);
                s.ticks = run.base_ticks;
                s.addr = 0;
                continue;
            }
            case RecordKind::Alloc: {
                format::records::Alloc alloc;
                format::read_trusted(q, alloc);
                s.ticks += static_cast<uint64_t>(alloc.dticks);
                e.size = alloc.size;
                s.addr += static_cast<uint64_t>(alloc.daddr);
                e.stack = alloc.stack_id;
                break;
            }
            case RecordKind::Free: {
                format::records::Free free_record;
                format::read_trusted(q, free_record);
                s.ticks += static_cast<uint64_t>(free_record.dticks);
                s.addr += static_cast<uint64_t>(free_record.daddr);
                break;
            }
            default:
                if (!is_thread_event(kind)) {
                    out.on_record(kind, payload, static_cast<size_t>(length));
                    continue;
                }
                s.ticks += static_cast<uint64_t>(format::zigzag_decode(take_varint(q)));
                e.rest = q;
                e.rest_size = static_cast<size_t>(payload + length - q);
        }
        e.kind = kind;
        e.tid = s.tid;
        e.ticks = s.ticks;
        e.addr = s.addr;
        s.has_event = true;
        return;
    }
}

void EventMerger::deliver(const Event& e, TraceCompactor& out) {
    switch (static_cast<RecordKind>(e.kind)) {
        case RecordKind::Alloc: return out.on_alloc(e.tid, e.ticks, e.addr, e.size, e.stack);
        case RecordKind::Free: return out.on_free(e.tid, e.ticks, e.addr);
        default: return out.on_thread_event(e.tid, e.ticks, e.kind, e.rest, e.rest_size);
    }
}

bool EventMerger::earlier(uint32_t a, uint32_t b) const {
    const Stream& x = streams_[a];
    const Stream& y = streams_[b];
    // Equal times (two threads' clocks read in the same tick): by stream, so that the order,
    // and the trace, never depend on the order the buffers arrived in.
    return x.event.ticks < y.event.ticks || (x.event.ticks == y.event.ticks && x.id < y.id);
}

void EventMerger::sift_down(size_t i) {
    for (;;) {
        size_t best = i, l = 2 * i + 1, r = l + 1;
        if (l < heap_size_ && earlier(heap_[l], heap_[best])) best = l;
        if (r < heap_size_ && earlier(heap_[r], heap_[best])) best = r;
        if (best == i) return;
        uint32_t t = heap_[i];
        heap_[i] = heap_[best];
        heap_[best] = t;
        i = best;
    }
}

void EventMerger::sift_up(size_t i) {
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!earlier(heap_[i], heap_[parent])) return;
        uint32_t t = heap_[i];
        heap_[i] = heap_[parent];
        heap_[parent] = t;
        i = parent;
    }
}

void EventMerger::merge(TraceCompactor& out, bool final, Release release) {
    const uint64_t until = limit(final);
    heap_size_ = 0;
    if (!reserve(heap_, heap_capacity_, count_)) return;
    for (size_t i = 0; i < count_; ++i) {
        Stream& s = streams_[i];
        if (!s.has_event) fill(s, out, release);
        if (s.has_event && s.event.ticks <= until) {
            heap_[heap_size_++] = static_cast<uint32_t>(i);
            sift_up(heap_size_ - 1);
        }
    }
    while (heap_size_) {
        Stream& s = streams_[heap_[0]];
        // The stream goes on while it stays the earliest: one comparison an event.
        uint64_t bound = until;
        for (size_t child = 1; child <= 2 && child < heap_size_; ++child)
            if (streams_[heap_[child]].event.ticks < bound) bound = streams_[heap_[child]].event.ticks;
        do {
            deliver(s.event, out);
            fill(s, out, release);
        } while (s.has_event && s.event.ticks < bound);
        if (s.has_event && s.event.ticks <= until) {
            sift_down(0);
        } else {
            heap_[0] = heap_[--heap_size_];
            sift_down(0);
        }
    }
    remove_finished();
}

void EventMerger::remove_finished() {
    size_t kept = 0;
    for (size_t i = 0; i < count_; ++i) {
        Stream& s = streams_[i];
        const bool finished = s.gone && !s.has_event && !s.head;
        if (finished) continue;
        if (kept != i) memmove(static_cast<void*>(&streams_[kept]), &s, sizeof(Stream));
        ++kept;
    }
    count_ = kept;
}

void EventMerger::reset(Release release) {
    for (size_t i = 0; i < count_; ++i)
        for (Buffer* b = streams_[i].head; b;) {
            Buffer* next = b->next;
            release(b);
            b = next;
        }
    count_ = 0;
    heap_size_ = 0;
}

size_t EventMerger::buffers_held() const {
    size_t n = 0;
    for (size_t i = 0; i < count_; ++i)
        for (const Buffer* b = streams_[i].head; b; b = b->next) ++n;
    return n;
}

}  // namespace growtrace::preload
