#include "preload/trace_compactor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "format/trace_format.h"
#include "format/varint.h"
#include "preload/sampler.h"

namespace growtrace::preload {
namespace {

using format::RecordKind;

// About 0.1 ms at 2.5 GHz: finer than any window the analyzer uses.
constexpr int64_t kTimeQuantum = format::kTimeQuantumTicks;
// Sampled traces: events are sparse, so nearly every one needs a Time record; their times go
// on a grid of about 3.4 ms (still finer than the analyzer's 10 ms windows), which makes the
// deltas low in entropy. Thread events then happen at the grid time too.
constexpr int64_t kSampledTimeQuantum = format::kSampledTimeQuantumTicks;

inline size_t hash_addr(uint64_t addr) {
    uint64_t h = addr * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h ^ (h >> 31));
}

// Populated at once: the table is filled by hash, so every page is touched soon, and one call
// is far cheaper than a page fault per page (most of all in virtual machines).
template <typename T>
T* map_zeroed(size_t count) {
    void* mem = mmap(nullptr, count * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                     -1, 0);
    return mem == MAP_FAILED ? nullptr : static_cast<T*>(mem);
}

bool is_thread_event_with_ticks(uint8_t kind) {
    return kind == static_cast<uint8_t>(RecordKind::CacheCreate) ||
           kind == static_cast<uint8_t>(RecordKind::CacheInsert) ||
           kind == static_cast<uint8_t>(RecordKind::TypeCreate) ||
           kind == static_cast<uint8_t>(RecordKind::Collection) ||
           kind == static_cast<uint8_t>(RecordKind::Container);
}

}  // namespace

// --- the address table: open addressing, linear probing, one entry per address ---

void TraceCompactor::Table::grow() {
    const size_t old_capacity = slots ? mask + 1 : 0;
    const size_t capacity = old_capacity ? old_capacity * 2 : kMinCapacity;
    Entry* old = slots;
    Entry* fresh = map_zeroed<Entry>(capacity);
    if (!fresh) return;  // keep the old table: full, but still correct to probe
    slots = fresh;
    mask = capacity - 1;
    for (size_t i = 0; i < old_capacity; ++i) {
        if (!old[i].addr) continue;
        size_t j = hash_addr(old[i].addr) & mask;
        while (slots[j].addr) j = (j + 1) & mask;
        slots[j] = old[i];
    }
    if (old) munmap(old, old_capacity * sizeof(Entry));
}

TraceCompactor::Entry* TraceCompactor::Table::find_or_add(uint64_t addr, bool& existed) {
    if (!slots || (size + 1) * 2 > mask + 1) grow();
    if (!slots || size + 1 > mask) return nullptr;  // could not grow
    size_t i = hash_addr(addr) & mask;
    for (; slots[i].addr; i = (i + 1) & mask)
        if (slots[i].addr == addr) {
            existed = true;
            return &slots[i];
        }
    existed = false;
    slots[i] = {addr, 0};
    ++size;
    return &slots[i];
}

void TraceCompactor::Table::erase_slot(size_t i) {
    // Backward-shift deletion keeps every remaining entry reachable from its home slot.
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!slots[j].addr) break;
        size_t home = hash_addr(slots[j].addr) & mask;
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        slots[i] = slots[j];
        i = j;
    }
    slots[i].addr = 0;
    --size;
}

uint64_t TraceCompactor::Table::take(uint64_t addr) {
    if (!slots) return 0;
    for (size_t i = hash_addr(addr) & mask; slots[i].addr; i = (i + 1) & mask)
        if (slots[i].addr == addr) {
            const uint64_t id = slots[i].id;
            erase_slot(i);
            return id;
        }
    return 0;
}

const TraceCompactor::Entry* TraceCompactor::Table::find(uint64_t addr) const {
    if (!slots) return nullptr;
    for (size_t i = hash_addr(addr) & mask; slots[i].addr; i = (i + 1) & mask)
        if (slots[i].addr == addr) return &slots[i];
    return nullptr;
}

void TraceCompactor::Table::clear() {
    if (slots) munmap(slots, (mask + 1) * sizeof(Entry));
    slots = nullptr;
    mask = 0;
    size = 0;
}

// --- rewriting ---

void TraceCompactor::put(uint8_t kind, const uint8_t* payload, size_t size) {
    // One sink call per record: the writer may start a new block between two calls.
    if (size > kMaxRebasedRecord) return;
    record_[0] = kind;
    uint8_t* body = format::put_varint(record_ + 1, size);
    memcpy(body, payload, size);
    sink_(record_, static_cast<size_t>(body - record_) + size);
}

// The records written for every event hold one or two varints: encoded in place, with a
// one-byte length, instead of through put()'s copy.
void TraceCompactor::put_small(RecordKind kind, uint64_t a) {
    uint8_t* end = format::put_varint(record_ + 2, a);
    finish_small(kind, end);
}

void TraceCompactor::put_small(RecordKind kind, uint64_t a, uint64_t b) {
    uint8_t* end = format::put_varint(format::put_varint(record_ + 2, a), b);
    finish_small(kind, end);
}

void TraceCompactor::finish_small(RecordKind kind, const uint8_t* end) {
    record_[0] = static_cast<uint8_t>(kind);
    record_[1] = static_cast<uint8_t>(end - record_ - 2);  // at most 20 bytes: one length byte
    sink_(record_, static_cast<size_t>(end - record_));
}

void TraceCompactor::mark_exit(uint64_t ticks) {
    if (ticks && (!exit_ticks_ || ticks < exit_ticks_)) exit_ticks_ = ticks;
}

void TraceCompactor::sync_time(uint64_t ticks) {
    auto delta = static_cast<int64_t>(ticks - written_ticks_);
    bool crosses_exit = exit_ticks_ && (written_ticks_ > exit_ticks_) != (ticks > exit_ticks_);
    const int64_t quantum = sampled_ ? kSampledTimeQuantum : kTimeQuantum;
    if (!crosses_exit && delta < quantum && delta > -quantum) return;
    if (sampled_ && !crosses_exit) {
        ticks &= ~static_cast<uint64_t>(kSampledTimeQuantum - 1);
        delta = static_cast<int64_t>(ticks - written_ticks_);
    }
    put_small(RecordKind::Time, format::zigzag_encode(delta));
    written_ticks_ = ticks;
}

void TraceCompactor::emit_free_of(uint64_t id, uint64_t ticks, bool countable) {
    sync_time(ticks);
    put_small(RecordKind::FreeCompact, allocations_ - id);
    ++frees_written_;
    if (LedgerEntry* e = sampled_ ? ledger_entry(id) : nullptr; e && e->state == LedgerState::Live) {
        e->death = written_ticks_;
        e->state = countable ? LedgerState::Freed : LedgerState::Kept;
    }
}

void TraceCompactor::emit_alloc(uint64_t ticks, uint64_t size, uint64_t addr, uint64_t stack) {
    bool existed = false;
    Entry* slot = live_.find_or_add(addr, existed);
    if (existed) {
        // The allocator gave the address out again: the block there was freed where the tracer
        // could not see it (inside libc while attached, say). Its free is written now.
        ++inferred_frees_;
        emit_free_of(slot->id, ticks, false);
    }
    sync_time(ticks);
    uint64_t id = ++allocations_;
    if (slot) slot->id = id;
    put_small(RecordKind::AllocCompact, size, stack);
    if (sampled_) {
        if (!ledger_) {
            ledger_ = map_zeroed<LedgerEntry>(kLedgerEntries);
            ledger_order_ = map_zeroed<uint32_t>(kLedgerEntries);
            if (!ledger_order_) ledger_ = nullptr;  // then nothing is counted: the records stay as they are
        }
        // A size-0 record is no sample: it stands for nothing to count.
        if (LedgerEntry* e = ledger_entry(id))
            *e = {stack, size, written_ticks_, 0, 0, size ? LedgerState::Live : LedgerState::Kept};
    }
}

void TraceCompactor::begin(Sink sink) {
    sink_ = sink;
    sampled_ = sampling_enabled();
}

void TraceCompactor::enter_run(uint32_t tid, uint64_t ticks) {
    run_tid_ = tid;
    run_ticks_ = ticks;
    if (out_tid_ == tid) return;
    // The reader's clock stays where it is; the first run's starts at its first event (on the
    // sampled grid in a sampled trace).
    if (!written_ticks_) written_ticks_ = sampled_ ? ticks & ~static_cast<uint64_t>(kSampledTimeQuantum - 1) : ticks;
    uint8_t payload[2 * format::kMaxVarintBytes];
    uint8_t* q = format::put_varint(format::put_varint(payload, tid), written_ticks_);
    put(static_cast<uint8_t>(RecordKind::Thread), payload, static_cast<size_t>(q - payload));
    out_tid_ = tid;
}

bool TraceCompactor::has_context(uint64_t tid) const {
    if (contexts_untracked_) return true;
    if (!threads_with_context_) return false;
    for (const OpenContexts& c : contexts_)
        if (c.tid == tid) return true;
    return false;
}

void TraceCompactor::note_context(uint64_t tid, uint8_t kind, const uint8_t* rest, size_t size) {
    if (kind != static_cast<uint8_t>(RecordKind::CacheInsert) && kind != static_cast<uint8_t>(RecordKind::Collection))
        return;
    format::Cursor c(rest, rest + size);
    uint64_t phase;
    if (!c.varint(phase)) return;
    const bool opens = phase == 0;
    OpenContexts* free_slot = nullptr;
    for (OpenContexts& t : contexts_) {
        if (t.tid == tid) {
            if (opens) ++t.open;
            else if (--t.open == 0) {
                t.tid = 0;
                --threads_with_context_;
            }
            return;
        }
        if (!t.tid && !free_slot) free_slot = &t;
    }
    if (!opens) {
        if (contexts_untracked_) --contexts_untracked_;
        return;
    }
    if (!free_slot) {
        ++contexts_untracked_;
        return;
    }
    *free_slot = {tid, 1};
    ++threads_with_context_;
}

void TraceCompactor::enter_event_run(uint32_t tid, uint64_t ticks) {
    if (out_tid_ && out_tid_ != tid && !has_context(tid) && !has_context(out_tid_)) {
        run_tid_ = tid;
        run_ticks_ = ticks;
        return;
    }
    enter_run(tid, ticks);
}

void TraceCompactor::on_alloc(uint32_t tid, uint64_t ticks, uint64_t addr, uint64_t size, uint64_t stack) {
    enter_event_run(tid, ticks);
    if (size) write_held();  // a sample: the held misses it falls in are written
    emit_alloc(ticks, size, addr, stack);
}

void TraceCompactor::on_free(uint32_t tid, uint64_t ticks, uint64_t addr) {
    const uint64_t id = live_.take(addr);
    if (!id) {
        // Nothing live there, every event before this one having been seen: memory allocated
        // before the trace began, or by a path the tracer does not see.
        ++untraced_frees_;
        return;
    }
    enter_event_run(tid, ticks);
    emit_free_of(id, ticks, !collecting(tid));
}

void TraceCompactor::on_thread_event(uint32_t tid, uint64_t ticks, uint8_t kind, const uint8_t* rest, size_t size) {
    enter_run(tid, ticks);
    note_context(tid, kind, rest, size);
    write_thread_event(kind, rest, size);
}

void TraceCompactor::on_record(uint8_t kind, const uint8_t* payload, size_t size) { put(kind, payload, size); }

void TraceCompactor::note_recorded(uint64_t allocations, uint64_t frees, uint64_t lost) {
    recorded_allocations_ += allocations;
    recorded_frees_ += frees;
    lost_events_ += lost;
}

void TraceCompactor::write_ledger() {
    uint8_t payload[9 * format::kMaxVarintBytes];
    uint8_t* q = payload;
    // A sample counted in a ShortLivedSamples record is still one allocation and one free written.
    for (uint64_t v : {recorded_allocations_, recorded_frees_, allocations_ + folded_, frees_written_, uint64_t{live_.size},
                       weightless_, untraced_frees_, inferred_frees_, lost_events_})
        q = format::put_varint(q, v);
    put(static_cast<uint8_t>(RecordKind::Ledger), payload, static_cast<size_t>(q - payload));
}

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

// --- short-lived samples (sampled traces) ---
//
// Most samples of a busy program are freed a few milliseconds after they were made: written one
// by one, each is an AllocCompact, a FreeCompact and often a Time record or two. Counted instead
// per stack and size in one record per block, they cost a few bytes per stack. The reader only
// loses what it never uses from them: the thread and the exact times within an interval in which
// they were both born and dead (docs/sampling.md, "Short-lived samples").

TraceCompactor::LedgerEntry* TraceCompactor::ledger_entry(uint64_t id) {
    if (!ledger_ || id <= ledger_base_ || id - ledger_base_ > kLedgerEntries) return nullptr;
    return &ledger_[id - ledger_base_ - 1];
}

void TraceCompactor::keep_allocation(uint64_t id) {
    if (LedgerEntry* e = ledger_entry(id)) e->state = LedgerState::Kept;
}

bool TraceCompactor::collecting(uint64_t tid) const {
    if (collecting_untracked_) return true;
    for (uint64_t t : collecting_)
        if (t && t == tid) return true;
    return false;
}

void TraceCompactor::note_collection(const uint8_t* rest, size_t size) {
    format::Cursor c(rest, rest + size);
    uint64_t phase;
    if (!c.varint(phase)) return;
    const bool start = phase == 0;
    for (uint64_t& t : collecting_)
        if (t == run_tid_) {
            if (!start) t = 0;
            return;
        }
    if (!start) {
        if (collecting_untracked_) --collecting_untracked_;
        return;
    }
    for (uint64_t& t : collecting_)
        if (!t) {
            t = run_tid_;
            return;
        }
    ++collecting_untracked_;
}

uint64_t TraceCompactor::removed_up_to(uint64_t id, uint64_t entries, uint64_t removed) const {
    if (id <= ledger_base_) return 0;
    const uint64_t index = id - ledger_base_ - 1;
    return index < entries ? ledger_[index].removed_before : removed;
}

void TraceCompactor::start_ledger() { ledger_base_ = allocations_; }

namespace {

// The rewritten block: bounded, and failed for good once something did not fit.
struct FoldOutput {
    uint8_t* p;
    uint8_t* end;
    bool ok = true;

    bool room(size_t n) {
        if (static_cast<size_t>(end - p) < n) ok = false;
        return ok;
    }
    void record(uint8_t kind, const uint8_t* payload, size_t size) {
        if (!room(1 + format::kMaxVarintBytes + size)) return;
        *p++ = kind;
        p = format::put_varint(p, size);
        memcpy(p, payload, size);
        p += size;
    }
    void varint(uint64_t v) {
        if (room(format::kMaxVarintBytes)) p = format::put_varint(p, v);
    }
};

uint64_t find_start_ticks(const uint8_t* block, size_t size) {
    format::Cursor c(block, block + size);
    uint8_t kind;
    uint64_t length, pid, ppid, start;
    while (c.byte(kind) && c.varint(length) && length <= c.remaining()) {
        format::Cursor p(c.position(), c.position() + length);
        c.skip(static_cast<size_t>(length));
        if (kind == static_cast<uint8_t>(RecordKind::Process) && p.varint(pid) && p.varint(ppid) && p.varint(start))
            return start;
    }
    return 0;
}


// A thread event's payload after its dticks, copied to `q` with the allocations it names (1 +
// age, 0 none: a TypeCreate's last field, a Container's leading ones) renumbered by `age_now`
// (which never makes an age larger, so the copy is never longer). `count`: allocations so far.
template <typename AgeNow>
uint8_t* renumber_allocations(uint8_t kind, const uint8_t* rest, size_t size, uint64_t count, AgeNow age_now,
                              uint8_t* q) {
    format::Cursor c(rest, rest + size);
    auto holder = [&](uint64_t h) { return h && h - 1 < count ? 1 + age_now(h - 1) : h; };
    auto copy = [&](const uint8_t* from, const uint8_t* to) {
        memcpy(q, from, static_cast<size_t>(to - from));
        q += to - from;
    };
    uint8_t* const start = q;
    uint64_t v, h;
    if (kind == static_cast<uint8_t>(RecordKind::TypeCreate)) {
        const uint8_t* text;
        size_t n;
        if (c.varint(v) && c.varint(v) && c.varint(v) && c.bytes(text, n) && c.bytes(text, n) && c.bytes(text, n)) {
            const uint8_t* field = c.position();
            if (c.varint(h)) {
                copy(rest, field);
                q = format::put_varint(q, holder(h));
                copy(c.position(), rest + size);
                return q;
            }
        }
    } else if (kind == static_cast<uint8_t>(RecordKind::Container) && c.varint(v) && v <= 64) {
        q = format::put_varint(q, v);
        bool whole = true;
        for (uint64_t i = 0; i < v && whole; ++i) {
            whole = c.varint(h);
            if (whole) q = format::put_varint(q, holder(h));
        }
        if (whole) {
            copy(c.position(), rest + size);
            return q;
        }
        q = start;
    }
    copy(rest, rest + size);
    return q;
}

}  // namespace

size_t TraceCompactor::fold_short_lived(const uint8_t* block, size_t size, uint8_t* out, size_t out_capacity) {
    const uint64_t written = allocations_ - ledger_base_;
    const uint64_t entries = ledger_ ? std::min<uint64_t>(written, kLedgerEntries) : 0;
    if (!origin_ticks_) origin_ticks_ = find_start_ticks(block, size);
    uint64_t last = 0, freed = 0;
    for (uint64_t i = 0; i < entries; ++i)
        if (ledger_[i].state == LedgerState::Freed) {
            last = std::max(last, ledger_[i].death);
            ++freed;
        }
    size_t result = 0;
    if (freed && origin_ticks_ && sampled_) {
        // The narrowest windows a reader can have once the trace reaches `last`: a sample born
        // and dead within one of them (aligned on the trace's start) is in one window of every
        // reader, as its two records would have put it.
        const uint64_t origin = origin_ticks_;
        const uint64_t span = last > origin ? last - origin : 0;
        unsigned shift = 0;
        while ((span >> shift) >= format::kShortLivedReaderWindows) ++shift;
        uint64_t removed = 0;
        for (uint64_t i = 0; i < entries; ++i) {
            LedgerEntry& e = ledger_[i];
            const bool take = e.state == LedgerState::Freed && e.birth >= origin && e.death >= e.birth &&
                              ((e.birth - origin) >> shift) == ((e.death - origin) >> shift) &&
                              !(exit_ticks_ && e.death > exit_ticks_);  // the reader drops frees after the exit
            if (take) ledger_order_[removed++] = static_cast<uint32_t>(i);
            e.state = take ? LedgerState::Freed : LedgerState::Kept;
            e.removed_before = static_cast<uint32_t>(removed);
        }
        if (removed) result = write_folded(block, size, out, out_capacity, entries, removed, shift, last);
        if (result) {
            // Numbers handed out in this block now count only the allocations written.
            for (size_t i = 0; live_.slots && i <= live_.mask; ++i) {
                Entry& e = live_.slots[i];
                if (e.addr && e.id > ledger_base_) e.id -= removed_up_to(e.id, entries, removed);
            }
            allocations_ -= removed;
            folded_ += removed;
        }
    }
    start_ledger();
    return result;
}

size_t TraceCompactor::write_folded(const uint8_t* block, size_t size, uint8_t* out, size_t out_capacity,
                                    uint64_t entries, uint64_t removed, unsigned shift, uint64_t last) {
    auto taken = [&](uint64_t id) {
        return id > ledger_base_ && id - ledger_base_ <= entries && ledger_[id - ledger_base_ - 1].state == LedgerState::Freed;
    };
    // An age (as in FreeCompact) counted at allocation `count`, as the block now numbers them.
    auto age_now = [&](uint64_t count, uint64_t age) {
        return age - (removed_up_to(count, entries, removed) - removed_up_to(count - age, entries, removed));
    };
    FoldOutput o{out, out + out_capacity};
    format::Cursor c(block, block + size);
    uint64_t count = ledger_base_;
    // The run's clock as the block had it, and as what is written so far gives it.
    uint64_t clock = 0, shown = 0;
    auto catch_up = [&] {
        if (shown == clock) return;
        uint8_t t[format::kMaxVarintBytes];
        o.record(static_cast<uint8_t>(RecordKind::Time), t,
                 static_cast<size_t>(format::put_varint(t, format::zigzag_encode(static_cast<int64_t>(clock - shown))) - t));
        shown = clock;
    };
    uint8_t rebased[kMaxRebasedRecord + 2 * format::kMaxVarintBytes];
    while (!c.at_end()) {
        uint8_t kind;
        uint64_t length;
        if (!c.byte(kind) || !c.varint(length) || length > c.remaining()) return 0;
        const uint8_t* payload = c.position();
        format::Cursor p(payload, payload + length);
        c.skip(static_cast<size_t>(length));
        if (kind == static_cast<uint8_t>(RecordKind::Thread)) {
            uint64_t tid;
            if (!p.varint(tid) || !p.varint(clock)) return 0;
            shown = clock;
            o.record(kind, payload, length);
        } else if (kind == static_cast<uint8_t>(RecordKind::Time)) {
            int64_t d;
            if (!p.svarint(d)) return 0;
            clock += static_cast<uint64_t>(d);  // written before the next event kept, if any
        } else if (kind == static_cast<uint8_t>(RecordKind::AllocCompact)) {
            if (taken(++count)) continue;
            catch_up();
            o.record(kind, payload, length);
        } else if (kind == static_cast<uint8_t>(RecordKind::FreeCompact)) {
            uint64_t age;
            if (!p.varint(age) || age >= count) return 0;
            if (taken(count - age)) continue;
            catch_up();
            uint8_t b[format::kMaxVarintBytes];
            o.record(kind, b, static_cast<size_t>(format::put_varint(b, age_now(count, age)) - b));
        } else if (is_thread_event_with_ticks(kind)) {
            // Its own dticks carries what the Time records taken out no longer do.
            int64_t d;
            if (!p.svarint(d) || p.remaining() > kMaxRebasedRecord) return 0;
            clock += static_cast<uint64_t>(d);
            uint8_t* q = format::put_varint(rebased, format::zigzag_encode(static_cast<int64_t>(clock - shown)));
            q = renumber_allocations(kind, p.position(), p.remaining(), count,
                                     [&](uint64_t age) { return age_now(count, age); }, q);
            o.record(kind, rebased, static_cast<size_t>(q - rebased));
            shown = clock;
        } else {
            o.record(kind, payload, length);
        }
    }
    if (count != allocations_) return 0;  // not the block the ledger describes: leave it as it is
    // The run may go on in the next block (merged order cuts blocks in the middle of runs).
    catch_up();
    if (!o.ok || !write_short_lived(o.p, o.end, removed, shift, last)) return 0;
    return static_cast<size_t>(o.p - out);
}

bool TraceCompactor::write_short_lived(uint8_t*& out, uint8_t* end, uint64_t removed, unsigned shift, uint64_t last) {
    const uint64_t origin = origin_ticks_;
    uint32_t* const order = ledger_order_;
    auto interval = [&](uint32_t i) { return (ledger_[i].birth - origin) >> shift; };
    auto same_interval = [&](uint32_t a, uint32_t b) { return interval(a) == interval(b); };
    auto same_stack = [&](uint32_t a, uint32_t b) { return same_interval(a, b) && ledger_[a].stack == ledger_[b].stack; };
    auto same_size = [&](uint32_t a, uint32_t b) { return same_stack(a, b) && ledger_[a].size == ledger_[b].size; };
    std::sort(order, order + removed, [&](uint32_t a, uint32_t b) {
        if (!same_interval(a, b)) return interval(a) < interval(b);
        if (ledger_[a].stack != ledger_[b].stack) return ledger_[a].stack < ledger_[b].stack;
        return ledger_[a].size < ledger_[b].size;
    });
    // The end of the group that begins at i, and how many groups [i, to) holds.
    auto group_end = [&](uint64_t i, uint64_t to, auto same) {
        uint64_t j = i + 1;
        while (j < to && same(order[i], order[j])) ++j;
        return j;
    };
    auto groups = [&](uint64_t i, uint64_t to, auto same) {
        uint64_t n = 0;
        for (; i < to; i = group_end(i, to, same)) ++n;
        return n;
    };
    // The payload goes after room for the kind and the longest length, and is moved into place.
    constexpr size_t kHead = 1 + format::kMaxVarintBytes;
    if (static_cast<size_t>(end - out) < kHead) return false;
    FoldOutput o{out + kHead, end};
    const uint64_t first = interval(order[0]);
    o.varint(last);
    o.varint(shift);
    o.varint(origin + (first << shift));
    o.varint(groups(0, removed, same_interval));
    for (uint64_t i = 0, previous = first; i < removed;) {
        const uint64_t i_end = group_end(i, removed, same_interval);
        o.varint(interval(order[i]) - previous);
        previous = interval(order[i]);
        o.varint(groups(i, i_end, same_stack));
        for (uint64_t k = i, previous_stack = 0; k < i_end;) {
            const uint64_t k_end = group_end(k, i_end, same_stack);
            o.varint(ledger_[order[k]].stack - previous_stack);
            previous_stack = ledger_[order[k]].stack;
            o.varint(groups(k, k_end, same_size));
            for (uint64_t m = k, previous_size = 0; m < k_end;) {
                const uint64_t m_end = group_end(m, k_end, same_size);
                o.varint(ledger_[order[m]].size - previous_size);
                previous_size = ledger_[order[m]].size;
                o.varint(m_end - m);
                m = m_end;
            }
            k = k_end;
        }
        i = i_end;
    }
    if (!o.ok) return false;
    const size_t payload = static_cast<size_t>(o.p - (out + kHead));
    out[0] = static_cast<uint8_t>(RecordKind::ShortLivedSamples);
    uint8_t* body = format::put_varint(out + 1, payload);
    memmove(body, out + kHead, payload);
    out = body + payload;
    return true;
}

void TraceCompactor::reset() {
    for (uint64_t& t : collecting_) t = 0;
    collecting_untracked_ = 0;
    origin_ticks_ = 0;
    ledger_base_ = 0;
    for (CacheState& k : caches_) k = CacheState{};
    for (HeldThread& t : held_) t.depth = 0;
    held_count_ = 0;
    live_.clear();
    allocations_ = 0;
    frees_written_ = weightless_ = untraced_frees_ = inferred_frees_ = folded_ = 0;
    recorded_allocations_ = recorded_frees_ = lost_events_ = 0;
    run_ticks_ = run_tid_ = 0;
    out_tid_ = 0;
    for (OpenContexts& c : contexts_) c = OpenContexts{};
    threads_with_context_ = contexts_untracked_ = 0;
    written_ticks_ = 0;
    exit_ticks_ = 0;
}

}  // namespace growtrace::preload
