#include "preload/write/trace_compactor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "format/trace_format.h"
#include "format/varint.h"
#include "preload/record/sampler.h"

namespace growtrace::preload {
namespace {

using format::RecordKind;
namespace records = format::records;

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
    put_record(records::Time{delta});
    written_ticks_ = ticks;
}

void TraceCompactor::emit_free_of(uint64_t id, uint64_t ticks, bool countable) {
    sync_time(ticks);
    put_record(records::FreeCompact{allocations_ - id});
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
    put_record(records::AllocCompact{size, stack});
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
    put_record(records::Thread{tid, written_ticks_});
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
    // Both kinds open with phase 0 (CacheInsert's begin, Collection's start).
    uint64_t phase;
    format::Cursor c(rest, rest + size);
    if (kind == static_cast<uint8_t>(RecordKind::CacheInsert)) {
        records::CacheInsert miss;
        if (!format::decode_after_dticks(c, miss)) return;
        phase = miss.phase;
    } else {
        records::Collection collection;
        if (!format::decode_after_dticks(c, collection)) return;
        phase = collection.phase;
    }
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
    // A sample counted in a ShortLivedSamples record is still one allocation and one free written.
    put_record(records::Ledger{recorded_allocations_, recorded_frees_, allocations_ + folded_, frees_written_,
                               uint64_t{live_.size}, weightless_, untraced_frees_, inferred_frees_, lost_events_});
}

}  // namespace growtrace::preload
