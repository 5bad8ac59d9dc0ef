// The CPython agent's records, rewritten for the file (trace_compactor.h): the blocks a
// TypeCreate or a Container record names by address become allocation ages, key descriptions
// already written are elided, and in a sampled trace the cache misses are counted per window
// instead of written one by one.
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "format/trace_format.h"
#include "format/varint.h"
#include "preload/record/sampler.h"
#include "preload/write/trace_compactor.h"

namespace growtrace::preload {
namespace {

using format::RecordKind;
constexpr int64_t kSampledTimeQuantum = format::kSampledTimeQuantumTicks;

}  // namespace

// A TypeCreate names its class by address, which v2 traces do not keep for allocations: the
// writer appends 1 + the age of the allocation holding the class object (0 = not traced), so
// the analyzer can tell whether the class is still alive and where it was allocated.
//
// In a sampled trace the class object's block is seldom a sample. The recorder follows its
// free all the same (recorder.cpp, watch_class_object), and here it gets a weightless
// allocation of size 0 (never a sample: a sample holds a sample point, so at least a byte),
// written before the TypeCreate, which then names it: class lifetimes stay exact.
uint64_t TraceCompactor::type_allocation(const uint8_t* rest, size_t size) {
    format::Cursor c(rest, rest + size);
    uint64_t source, address;
    if (!c.varint(source) || !c.varint(address)) return 0;
    // Classes are garbage-collected objects: CPython (3.10 to 3.13) allocates a 16-byte GC header just
    // before the object, so the block starts there.
    const Entry* e = live_.find(address - format::kPythonGcHeaderBytes);
    if (!e) e = live_.find(address);
    if (e) {
        keep_allocation(e->id);  // the reader finds the class's block by its number
        return allocations_ - e->id + 1;
    }
    if (!sampling_enabled() || address <= format::kPythonGcHeaderBytes) return 0;
    emit_alloc(run_ticks_, 0, address - format::kPythonGcHeaderBytes, 0);
    ++weightless_;
    return 1;
}

// A Container record names blocks by address, as a TypeCreate does: each becomes 1 + the age of
// the live allocation starting there (0 = none traced, e.g. a sampled trace's unsampled block).
size_t TraceCompactor::container_allocations(const uint8_t* rest, size_t size, uint8_t* out, size_t out_size) {
    format::Cursor c(rest, rest + size);
    uint64_t n;
    if (!c.varint(n) || n > 64) return 0;
    uint8_t* q = format::put_varint(out, n);
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t address;
        if (!c.varint(address)) return 0;
        const Entry* e = address ? live_.find(address) : nullptr;
        if (e) keep_allocation(e->id);
        q = format::put_varint(q, e ? allocations_ - e->id + 1 : 0);
    }
    if (static_cast<size_t>(q - out) + c.remaining() > out_size) return 0;
    memcpy(q, c.position(), c.remaining());
    return static_cast<size_t>(q - out) + c.remaining();
}

TraceCompactor::CacheState* TraceCompactor::cache_state(uint64_t cache_id, bool claim) {
    if (!cache_id) return nullptr;
    size_t slot = static_cast<size_t>(cache_id * 0x9E3779B97F4A7C15ull >> 56) % kTrackedCaches;
    for (size_t probe = 0; probe < kTrackedCaches; ++probe, slot = (slot + 1) % kTrackedCaches) {
        CacheState& s = caches_[slot];
        if (s.cache_id == cache_id) return &s;
        if (s.cache_id == 0) {
            if (!claim) return nullptr;
            s.cache_id = cache_id;
            return &s;
        }
    }
    return nullptr;
}

size_t TraceCompactor::elide_key_description(const uint8_t* rest, size_t size, uint8_t* out, bool& first_seen) {
    format::Cursor c(rest, rest + size);
    uint64_t phase, cache_id, seq, stack, before;
    const uint8_t* desc;
    size_t desc_size;
    if (!c.varint(phase) || phase != 0 || !c.varint(cache_id) || !cache_id || !c.varint(seq) || !c.varint(stack) ||
        !c.varint(before))
        return 0;
    const uint8_t* desc_field = c.position();
    if (!c.bytes(desc, desc_size) || desc_size == 0) return 0;
    // FNV-1a of the description.
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < desc_size; ++i) h = (h ^ desc[i]) * 0x100000001b3ull;
    CacheState* k = cache_state(cache_id, true);
    if (!k) {  // more caches than tracked: their descriptions are kept
        first_seen = true;
        return 0;
    }
    for (uint32_t i = 0; i < k->count; ++i)
        if (k->hashes[i] == h) return 0;  // seen: written again (its distinct count is unchanged)
    if (k->count < kKeptKeyDescriptions) {
        k->hashes[k->count++] = h;
        first_seen = true;
        return 0;
    }
    // One too many: the same payload with an empty description.
    const size_t head = static_cast<size_t>(desc_field - rest);
    const size_t tail = size - static_cast<size_t>(c.position() - rest);
    memcpy(out, rest, head);
    out[head] = 0;
    memcpy(out + head + 1, c.position(), tail);
    return head + 1 + tail;
}

void TraceCompactor::note_cache_create(const uint8_t* rest, size_t size) {
    format::Cursor c(rest, rest + size);
    uint64_t cache_id, flags;
    int64_t maxsize;
    if (!c.varint(cache_id) || !c.varint(flags) || !c.svarint(maxsize)) return;
    if (CacheState* s = cache_state(cache_id, true)) s->bounded = maxsize >= 0;
}

TraceCompactor::HeldThread* TraceCompactor::held_thread(uint64_t tid, bool claim) {
    HeldThread* free_slot = nullptr;
    for (HeldThread& t : held_) {
        if (t.depth && t.tid == tid) return &t;
        if (!t.depth && !free_slot) free_slot = &t;
    }
    if (!claim || !free_slot) return nullptr;
    free_slot->tid = tid;
    return free_slot;
}

bool TraceCompactor::count_miss(const uint8_t* rest, size_t size, bool first_seen) {
    format::Cursor c(rest, rest + size);
    uint64_t phase, cache_id, seq, stack, before;
    HeldThread* t = held_thread(run_tid_, false);
    if (c.varint(phase) && c.varint(cache_id) && c.varint(seq)) {
        if (phase != 0) {
            // Misses end innermost first: only the top held one can end here.
            if (t && t->misses[t->depth - 1].cache_id == cache_id && t->misses[t->depth - 1].seq == seq &&
                fold(t->misses[t->depth - 1], phase == 1, false)) {
                --t->depth;
                --held_count_;
                return true;
            }
        } else if (!first_seen && c.varint(stack) && c.varint(before) && size <= kHeldPayload) {
            const CacheState* s = cache_state(cache_id, false);
            if (s && s->bounded && (t || (t = held_thread(run_tid_, true))) && t->depth < kHeldDepth) {
                HeldMiss& m = t->misses[t->depth++];
                ++held_count_;
                m.cache_id = cache_id;
                m.seq = seq;
                m.stack = stack;
                m.entries_before = before;
                m.ticks = run_ticks_ & ~static_cast<uint64_t>(kSampledTimeQuantum - 1);  // as it would be written
                m.size = static_cast<uint32_t>(size);
                memcpy(m.payload, rest, size);
                return true;
            }
        }
    }
    write_held();
    return false;
}

// `force` (the trace ends): counted even if the window has no room left for its stack.
bool TraceCompactor::fold(const HeldMiss& m, bool stored, bool force) {
    CacheState* s = cache_state(m.cache_id, false);
    if (!s) return false;
    MissWindow& w = s->window;
    uint32_t i = 0;
    while (i < w.stacks && w.stack_ids[i] != m.stack) ++i;
    if (i == kWindowStacks && !force) return false;  // written instead: the window's stacks stay exact
    if (i < kWindowStacks) {
        if (i == w.stacks) w.stack_ids[w.stacks++] = m.stack;
        ++w.stack_misses[i];
    }
    if (w.misses == 0 || m.ticks < w.first_ticks) {
        w.first_ticks = m.ticks;
        w.first_entries_before = m.entries_before;
    }
    w.last_ticks = w.misses == 0 ? m.ticks : std::max(w.last_ticks, m.ticks);
    w.last_entries_after = m.entries_before + (stored ? 1 : 0);
    ++w.misses;
    if (stored) ++w.stored;
    return true;
}

// The current thread's held misses, written now (outermost first) at the run's written time:
// from here on the reader sees them open, as in a full trace.
void TraceCompactor::write_held() {
    if (!held_count_) return;
    HeldThread* t = held_thread(run_tid_, false);
    if (!t) return;
    sync_time(run_ticks_);
    uint8_t record[kHeldPayload + 1];
    record[0] = 0;  // dticks: at the run's written time
    for (uint32_t i = 0; i < t->depth; ++i) {
        memcpy(record + 1, t->misses[i].payload, t->misses[i].size);
        put(static_cast<uint8_t>(RecordKind::CacheInsert), record, t->misses[i].size + 1);
    }
    held_count_ -= t->depth;
    t->depth = 0;
}

void TraceCompactor::write_miss_counts(uint64_t ticks, bool final, Sink sink) {
    sink_ = sink;
    if (final) {
        for (HeldThread& t : held_)
            for (uint32_t i = t.depth; i-- > 0;) fold(t.misses[i], false, true);
        for (HeldThread& t : held_) t.depth = 0;
        held_count_ = 0;
    }
    // Records of at most kMaxRebasedRecord bytes; an entry takes at most kMaxEntry.
    constexpr size_t kMaxEntry = (8 + 2 * kWindowStacks) * format::kMaxVarintBytes;
    uint8_t entries[kMaxRebasedRecord];
    uint8_t* q = entries;
    uint64_t count = 0;
    auto emit = [&] {
        if (!count) return;
        uint8_t payload[kMaxRebasedRecord];
        uint8_t* head = format::put_varint(format::put_varint(payload, ticks), count);
        const size_t used = static_cast<size_t>(q - entries);
        if (static_cast<size_t>(head - payload) + used <= sizeof payload) {
            memcpy(head, entries, used);
            put(static_cast<uint8_t>(RecordKind::CacheMisses), payload, static_cast<size_t>(head - payload) + used);
        }
        q = entries;
        count = 0;
    };
    for (CacheState& s : caches_) {
        MissWindow& w = s.window;
        if (!s.cache_id || !w.misses) continue;
        // Stacks in increasing id order, each written as the step from the one before: ids of
        // one window are close together, so the steps are small.
        for (uint32_t i = 1; i < w.stacks; ++i)
            for (uint32_t j = i; j > 0 && w.stack_ids[j - 1] > w.stack_ids[j]; --j) {
                std::swap(w.stack_ids[j - 1], w.stack_ids[j]);
                std::swap(w.stack_misses[j - 1], w.stack_misses[j]);
            }
        if (static_cast<size_t>(q - entries) + kMaxEntry + 2 * format::kMaxVarintBytes > sizeof entries) emit();
        for (uint64_t v : {s.cache_id, w.misses, w.stored, w.first_ticks, w.last_ticks - w.first_ticks,
                           w.first_entries_before, w.last_entries_after, uint64_t{w.stacks}})
            q = format::put_varint(q, v);
        for (uint32_t i = 0; i < w.stacks; ++i)
            q = format::put_varint(format::put_varint(q, w.stack_ids[i] - (i ? w.stack_ids[i - 1] : 0)), w.stack_misses[i]);
        ++count;
        w = MissWindow{};
    }
    emit();
}

// A thread event (CacheCreate, CacheInsert, TypeCreate) at the run's clock, re-based on what
// the reader will know: the run's written clock.
void TraceCompactor::write_thread_event(uint8_t kind, const uint8_t* rest, size_t size) {
    const bool is_type = kind == static_cast<uint8_t>(RecordKind::TypeCreate);
    const bool is_miss = kind == static_cast<uint8_t>(RecordKind::CacheInsert);
    uint8_t body[kMaxRebasedRecord];
    if (sampled_ && kind == static_cast<uint8_t>(RecordKind::CacheCreate)) note_cache_create(rest, size);
    if (sampled_ && kind == static_cast<uint8_t>(RecordKind::Collection)) note_collection(rest, size);
    if (sampled_ && is_miss && size <= sizeof body) {
        bool first_seen = false;
        if (size_t elided = elide_key_description(rest, size, body, first_seen)) {
            rest = body;
            size = elided;
        }
        if (count_miss(rest, size, first_seen)) return;
    }
    // Found (or, sampled, written) before the record is encoded: a weightless allocation
    // written here may move the written clock.
    const uint64_t type_alloc = is_type ? type_allocation(rest, size) : 0;
    uint8_t resolved[kMaxRebasedRecord];
    if (kind == static_cast<uint8_t>(RecordKind::Container)) {
        size = container_allocations(rest, size, resolved, sizeof resolved);
        if (!size) return;
        rest = resolved;
    }
    // Sampled: the event happens at the run's written clock, on its grid.
    if (sampled_) sync_time(run_ticks_);
    const uint64_t event_ticks = sampled_ ? written_ticks_ : run_ticks_;
    uint8_t rebased[kMaxRebasedRecord];
    uint8_t* q =
        format::put_varint(rebased, format::zigzag_encode(static_cast<int64_t>(event_ticks - written_ticks_)));
    if (static_cast<size_t>(q - rebased) + size + format::kMaxVarintBytes > sizeof rebased) return;
    memcpy(q, rest, size);
    q += size;
    if (is_type) q = format::put_varint(q, type_alloc);
    put(kind, rebased, static_cast<size_t>(q - rebased));
    written_ticks_ = event_ticks;
}

}  // namespace growtrace::preload
