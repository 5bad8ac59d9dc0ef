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
namespace records = format::records;
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
    records::TypeCreate type;
    if (!format::decode_after_dticks(c, type)) return 0;
    const uint64_t address = type.address;
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
    records::Container container;
    if (!format::decode_after_dticks(c, container) || container.allocations.size() > records::Container::kMaxListed)
        return 0;
    records::ContainerAllocation allocations[records::Container::kMaxListed];
    size_t n = 0;
    container.allocations.for_each([&](const records::ContainerAllocation& block) {
        const Entry* e = block.allocation ? live_.find(block.allocation) : nullptr;
        if (e) keep_allocation(e->id);
        allocations[n++].allocation = e ? allocations_ - e->id + 1 : 0;
    });
    container.allocations = format::List<records::ContainerAllocation>::of(allocations, n);
    // 1 + age is never longer than the address it replaces, so the body never grows.
    if (size > out_size) return 0;
    return static_cast<size_t>(format::put_payload_after_dticks(out, container) - out);
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
    records::CacheInsert miss;
    if (!format::decode_after_dticks(c, miss) || miss.phase != records::CacheInsert::kBegin || !miss.cache_id ||
        miss.key_desc.size == 0)
        return 0;
    // FNV-1a of the description.
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < miss.key_desc.size; ++i) h = (h ^ miss.key_desc.data[i]) * 0x100000001b3ull;
    CacheState* k = cache_state(miss.cache_id, true);
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
    // One too many: the same record with an empty description (never longer).
    miss.key_desc = {};
    return static_cast<size_t>(format::put_payload_after_dticks(out, miss) - out);
}

void TraceCompactor::note_cache_create(const uint8_t* rest, size_t size) {
    format::Cursor c(rest, rest + size);
    records::CacheCreate cache;
    if (!format::decode_after_dticks(c, cache)) return;
    if (CacheState* s = cache_state(cache.cache_id, true)) s->bounded = cache.maxsize >= 0;
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
    records::CacheInsert miss;
    HeldThread* t = held_thread(run_tid_, false);
    if (format::decode_after_dticks(c, miss)) {
        if (miss.phase != records::CacheInsert::kBegin) {
            // Misses end innermost first: only the top held one can end here.
            if (t && t->misses[t->depth - 1].cache_id == miss.cache_id && t->misses[t->depth - 1].seq == miss.insert_seq &&
                fold(t->misses[t->depth - 1], miss.phase == 1, false)) {
                --t->depth;
                --held_count_;
                return true;
            }
        } else if (!first_seen && size <= kHeldPayload) {
            const CacheState* s = cache_state(miss.cache_id, false);
            if (s && s->bounded && (t || (t = held_thread(run_tid_, true))) && t->depth < kHeldDepth) {
                HeldMiss& m = t->misses[t->depth++];
                ++held_count_;
                m.cache_id = miss.cache_id;
                m.seq = miss.insert_seq;
                m.stack = miss.stack_id;
                m.entries_before = miss.entries_before;
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
    // Records of at most kMaxRebasedRecord bytes; an entry takes at most kMaxEntry. The windows
    // of a record are read as it is written, and emptied after.
    constexpr size_t kMaxEntry = (8 + 2 * kWindowStacks) * format::kMaxVarintBytes;
    CacheState* batch[kTrackedCaches];
    size_t count = 0, used = 0;
    auto emit = [&] {
        if (!count) return;
        const records::CacheMisses misses{
            ticks, format::List<records::CacheMissCount>::produced(
                       count, batch, [](const void* context, size_t i, records::CacheMissCount& out) {
                           out = miss_count(*static_cast<CacheState* const*>(context)[i]);
                       })};
        uint8_t payload[kMaxRebasedRecord];
        if (format::payload_size(misses) <= sizeof payload)
            put(static_cast<uint8_t>(RecordKind::CacheMisses), payload,
                static_cast<size_t>(format::put_payload(payload, misses) - payload));
        for (size_t i = 0; i < count; ++i) batch[i]->window = MissWindow{};
        count = used = 0;
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
        if (used + kMaxEntry + 2 * format::kMaxVarintBytes > kMaxRebasedRecord) emit();
        batch[count++] = &s;
        used += format::payload_size(miss_count(s));
    }
    emit();
}

// A cache's window as its entry of a CacheMisses record; the stacks are read from the window as
// the record is written.
format::records::CacheMissCount TraceCompactor::miss_count(const CacheState& s) {
    const MissWindow& w = s.window;
    return {s.cache_id,
            w.misses,
            w.stored,
            w.first_ticks,
            w.last_ticks - w.first_ticks,
            w.first_entries_before,
            w.last_entries_after,
            format::List<records::StackMisses>::produced(
                w.stacks, &w, [](const void* context, size_t i, records::StackMisses& out) {
                    const auto& window = *static_cast<const MissWindow*>(context);
                    out = {window.stack_ids[i] - (i ? window.stack_ids[i - 1] : 0), window.stack_misses[i]};
                })};
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
    const auto dticks = static_cast<int64_t>(event_ticks - written_ticks_);
    uint8_t rebased[kMaxRebasedRecord];
    size_t rebased_size = 0;
    if (is_type) {
        // The class's allocation, which the agent cannot know, is the record's trailing field.
        records::TypeCreate type;
        format::Cursor c(rest, rest + size);
        if (!format::decode_after_dticks(c, type)) return;
        type.dticks = dticks;
        type.type_allocation = type_alloc;
        type.has_type_allocation = true;
        if (format::payload_size(type) > sizeof rebased) return;
        rebased_size = static_cast<size_t>(format::put_payload(rebased, type) - rebased);
    } else {
        // Every thread event starts with its dticks (format/records.h); the rest is the agent's.
        uint8_t* q = format::put_varint(rebased, format::zigzag_encode(dticks));
        if (static_cast<size_t>(q - rebased) + size > sizeof rebased) return;
        memcpy(q, rest, size);
        rebased_size = static_cast<size_t>(q - rebased) + size;
    }
    put(kind, rebased, rebased_size);
    written_ticks_ = event_ticks;
}

}  // namespace growtrace::preload
