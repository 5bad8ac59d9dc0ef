// Rewrites the threads' events into the compact form stored on disk (trace format v2).
//
// Threads record each allocation with its address and a cycle-exact timestamp, which is what
// the hot path can produce without sharing anything. On disk neither is needed: the writer,
// which sees every event, matches each free to its allocation here and writes
//   AllocCompact  size, stack            (the n-th one in the file is allocation n)
//   FreeCompact   n_now - n              (how many allocations ago it was made)
//   Time          only when the clock moved by more than kTimeQuantum
//   Thread        when the thread changes
// Low-entropy numbers compress several times better than addresses and timestamps.
//
// Events arrive in time order, every thread's merged (event_merger.h), so at any address at
// most one allocation is live: a free ends it, and a free that finds none is of memory this
// trace never saw allocated (allocated before tracing began, or by a path the tracer does not
// see): it is counted, never written. An allocation at an address still live proves the block
// there was freed unseen (the allocator handed the address out again): its free is written
// then, and counted. The trace ends with a Ledger record of these counts, so that the reader
// can prove the file holds every allocation and free the hooks recorded.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/record_codec.h"
#include "format/records.h"
#include "format/trace_format.h"

namespace growtrace::preload {

class TraceCompactor {
public:
    using Sink = void (*)(const uint8_t* data, size_t size);

    // The records written from now on go to `sink`, one record per call, from a buffer of at
    // least kMaxRebasedRecord bytes (a sink may read past a small record's end, up to 16 bytes).
    void begin(Sink sink);
    // The events, in time order (EventMerger).
    void on_alloc(uint32_t tid, uint64_t ticks, uint64_t addr, uint64_t size, uint64_t stack);
    void on_free(uint32_t tid, uint64_t ticks, uint64_t addr);
    // A thread event (CacheCreate, CacheInsert, TypeCreate, Collection, Container): its payload
    // after its dticks.
    void on_thread_event(uint32_t tid, uint64_t ticks, uint8_t kind, const uint8_t* rest, size_t size);
    // A record of a thread's buffer with no time of its own (StackNode, PyFrame): as it is.
    void on_record(uint8_t kind, const uint8_t* payload, size_t size);
    // What the hooks committed to the buffers handed to the merger (Buffer's counters), and the
    // events they could not record for want of a buffer.
    void note_recorded(uint64_t allocations, uint64_t frees, uint64_t lost);
    // The trace ends: its Ledger record.
    void write_ledger();
    // A forked child starts a new trace with nothing live.
    void reset();
    // The program began to exit at `ticks` (Exiting record): the times written from now on
    // are exact where they cross it, so the reader can tell the frees of shutdown from those
    // before, though times are otherwise written to kTimeQuantum only.
    void mark_exit(uint64_t ticks);
    // Sampled traces: writes the CacheMisses records of the misses counted since the last call
    // (at `ticks`, the writer's clock), once every thread's buffer has been processed. `final`
    // (the trace ends) counts the misses still held open too.
    void write_miss_counts(uint64_t ticks, bool final, Sink sink);
    // Sampled traces, once the writer has a whole block of records (`block`, everything written
    // since the previous call) to write: the samples allocated and freed in it within one
    // interval (format::kShortLivedReaderWindows), which nothing else names, are taken out and
    // counted in one ShortLivedSamples record at its end. The block so rewritten goes to `out`
    // (`out_capacity` bytes); returns its size, or 0 when the block is to be written as it is.
    // Either way the allocations numbered from then on follow the block as written.
    size_t fold_short_lived(const uint8_t* block, size_t size, uint8_t* out, size_t out_capacity);

    uint64_t live_allocations() const { return live_.size; }
    uint64_t frees_of_untraced_memory() const { return untraced_frees_; }
    uint64_t inferred_frees() const { return inferred_frees_; }

private:
    // The live allocations by address: at most one per address, events being in time order.
    struct Entry {
        uint64_t addr;  // 0 = empty slot
        uint64_t id;    // allocation number
    };
    struct Table {
        Entry* slots = nullptr;
        size_t mask = 0;
        uint64_t size = 0;
        // The entry at addr, made (with id 0) if there is none; nullptr if the table cannot grow.
        Entry* find_or_add(uint64_t addr, bool& existed);
        // Removes the entry at addr; its id, 0 if none.
        uint64_t take(uint64_t addr);
        const Entry* find(uint64_t addr) const;
        void erase_slot(size_t i);
        void grow();
        static constexpr size_t kMinCapacity = 4096;
        void clear();
    };

    static constexpr size_t kMaxRebasedRecord = 8192;

    // Sampled traces stay small over hours: a cache miss's key description (up to
    // 512 bytes of text, most of a CacheInsert record) is written until the cache has shown
    // kKeptKeyDescriptions distinct ones, then left empty. The analyzer picks its example keys
    // among the first that many distinct descriptions of a cache anyway (python_caches.cpp,
    // kMaxCandidateKeys), so its report does not change; the miss itself, its key's classes and
    // its memory stay exact.
    static constexpr size_t kKeptKeyDescriptions = format::kSampledKeyDescriptionsPerCache;
    static constexpr size_t kTrackedCaches = 256;

    // Sampled traces also count, rather than write, the misses of caches that have a maxsize
    // (bounded: never a finding): a miss's begin is held back until its end, and counted then
    // (CacheMisses, once a second) unless its thread wrote a sample meanwhile, or another miss
    // began that is written; then the held begins are written where they stand, so every
    // sample is attributed to the same miss as in a full trace. Misses showing one of a
    // cache's first 64 distinct key descriptions are written too: the example keys and the
    // memory per miss stay exact, and the misses of unbounded caches are all written.
    // Distinct inserting stacks counted per cache and window: a service whose requests each run
    // in a new thread gives nearly every miss a stack of its own (tens per cache and second).
    static constexpr size_t kWindowStacks = 64;
    struct MissWindow {
        uint64_t misses = 0, stored = 0;
        uint64_t first_ticks = 0, last_ticks = 0, first_entries_before = 0, last_entries_after = 0;
        uint32_t stacks = 0;
        uint64_t stack_ids[kWindowStacks] = {}, stack_misses[kWindowStacks] = {};
    };
    struct CacheState {
        uint64_t cache_id = 0;  // 0 = free slot (the agent's ids start at 1)
        bool bounded = false;   // announced with a maxsize (in this trace)
        uint32_t count = 0;
        uint64_t hashes[kKeptKeyDescriptions] = {};
        MissWindow window;
    };
    static constexpr size_t kHeldThreads = 16, kHeldDepth = 4, kHeldPayload = 1024;
    struct HeldMiss {
        uint64_t cache_id, seq, stack, entries_before, ticks;
        uint32_t size;  // of payload: the CacheInsert payload after its dticks
        uint8_t payload[kHeldPayload];
    };
    struct HeldThread {
        uint64_t tid = 0;
        uint32_t depth = 0;  // 0 = free slot
        HeldMiss misses[kHeldDepth] = {};
    };

    // The state of a cache; `claim` takes a free slot for a cache not seen yet. nullptr: not
    // tracked (more caches than kTrackedCaches).
    CacheState* cache_state(uint64_t cache_id, bool claim);
    // The CacheInsert payload after its dticks, rewritten with an empty key description into
    // `out` when the description is one too many; 0 = keep it as it is. `first_seen`: the
    // description is one of the cache's first kKeptKeyDescriptions distinct ones.
    size_t elide_key_description(const uint8_t* rest, size_t size, uint8_t* out, bool& first_seen);
    void note_cache_create(const uint8_t* rest, size_t size);
    // A sampled CacheInsert: true when it is held or counted (nothing to write now); otherwise
    // the thread's held misses have been written and the record is to be written after them.
    bool count_miss(const uint8_t* rest, size_t size, bool first_seen);
    bool fold(const HeldMiss& m, bool stored, bool force);
    HeldThread* held_thread(uint64_t tid, bool claim);
    void write_held();
    static format::records::CacheMissCount miss_count(const CacheState& s);
    void write_thread_event(uint8_t kind, const uint8_t* rest, size_t size);

    // Sampled traces: what the current block holds of each allocation written since the block
    // began (the ledger), for fold_short_lived(). A sample becomes a candidate once its free is
    // written in the same block; anything that names it otherwise (a TypeCreate, a Container,
    // a free inside a collection, whose position the reader needs) keeps it as it is.
    static constexpr size_t kLedgerEntries = 8192;  // the openai reproduction: ~1,800 a block
    enum class LedgerState : uint8_t { Kept, Live, Freed };
    struct LedgerEntry {
        uint64_t stack, size;
        uint64_t birth, death;    // the written (reader's) ticks of its AllocCompact and FreeCompact
        uint32_t removed_before;  // fold: allocations taken out of the block up to this one
        LedgerState state;
    };
    LedgerEntry* ledger_entry(uint64_t id);
    void keep_allocation(uint64_t id);
    bool collecting(uint64_t tid) const;
    void note_collection(const uint8_t* rest, size_t size);
    // Allocations taken out of the current block up to allocation `id` (fold_short_lived).
    uint64_t removed_up_to(uint64_t id, uint64_t entries, uint64_t removed) const;
    void start_ledger();
    // fold_short_lived's work once it knows which `removed` allocations of the ledger to take
    // out: the block rewritten into `out`, ending with the ShortLivedSamples record; 0 if it
    // did not fit or was not the block the ledger describes.
    size_t write_folded(const uint8_t* block, size_t size, uint8_t* out, size_t out_capacity, uint64_t entries,
                        uint64_t removed, unsigned shift, uint64_t last);
    bool write_short_lived(uint8_t*& out, uint8_t* end, uint64_t removed, unsigned shift, uint64_t last);

    uint64_t type_allocation(const uint8_t* payload, size_t size);
    // A Container record's leading block addresses, rewritten into `out` as allocations;
    // returns the rewritten payload's size (0: left as it was).
    size_t container_allocations(const uint8_t* payload, size_t size, uint8_t* out, size_t out_size);
    // The event's thread and time: a Thread record when the thread is not the last one's.
    void enter_run(uint32_t tid, uint64_t ticks);
    // The same for an allocation or a free, which the reader attributes by thread only to a
    // thread with a cache miss or a full collection open: without one on either side, it is
    // written in the run at hand (threads that interleave finely cost no Thread records).
    void enter_event_run(uint32_t tid, uint64_t ticks);
    bool has_context(uint64_t tid) const;
    // A thread event that opens (+1) or closes (-1) a cache miss or a full collection.
    void note_context(uint64_t tid, uint8_t kind, const uint8_t* rest, size_t size);
    void emit_alloc(uint64_t ticks, uint64_t size, uint64_t addr, uint64_t stack);
    // `countable`: a sample freed here may be counted in a ShortLivedSamples record.
    void emit_free_of(uint64_t id, uint64_t ticks, bool countable);
    void sync_time(uint64_t ticks);
    void put(uint8_t kind, const uint8_t* payload, size_t size);
    // A record of the format (format/records.h) of varints only, encoded in place: the records
    // written for every event go through here, without put()'s copy.
    template <class R>
    void put_record(const R& record);

    Table live_;  // allocations alive, by address
    uint64_t allocations_ = 0;

    // The ledger (write_ledger).
    uint64_t frees_written_ = 0;
    uint64_t folded_ = 0;           // samples counted in ShortLivedSamples records (fold_short_lived)
    uint64_t weightless_ = 0;       // allocations of size 0 the writer adds (type_allocation)
    uint64_t untraced_frees_ = 0;   // frees that found no allocation: not written
    uint64_t inferred_frees_ = 0;   // allocations at a live address: the old block's free written
    uint64_t recorded_allocations_ = 0, recorded_frees_ = 0, lost_events_ = 0;

    // The current event's thread and time, and the thread of the run being written.
    uint64_t run_ticks_ = 0;
    uint64_t run_tid_ = 0;
    uint32_t out_tid_ = 0;  // 0: no run yet
    // Threads with a cache miss or a full collection open, as received (a miss held back in a
    // sampled trace counts too: the extra Thread records are harmless).
    static constexpr size_t kContextThreads = 64;
    struct OpenContexts {
        uint64_t tid = 0;  // 0: free slot
        uint32_t open = 0;
    };
    OpenContexts contexts_[kContextThreads] = {};
    uint32_t threads_with_context_ = 0;
    uint32_t contexts_untracked_ = 0;  // opened beyond kContextThreads: then every event switches
    uint64_t written_ticks_ = 0;  // time the reader believes the run is at
    uint64_t exit_ticks_ = 0;     // 0: not exiting
    bool sampled_ = false;        // the trace is sampled (coarser time grid, elided key descriptions)
    Sink sink_ = nullptr;
    uint8_t record_[kMaxRebasedRecord + 1 + 10] = {};
    CacheState caches_[kTrackedCaches] = {};
    HeldThread held_[kHeldThreads] = {};
    uint64_t held_count_ = 0;  // misses held, all threads

    LedgerEntry* ledger_ = nullptr;     // kLedgerEntries, mapped at the first sampled allocation
    uint32_t* ledger_order_ = nullptr;  // kLedgerEntries, for sorting the counted ones
    uint64_t ledger_base_ = 0;          // allocations_ when the block began
    uint64_t origin_ticks_ = 0;         // the Process record's start_ticks (0: not seen yet)
    // Threads inside a full collection (Collection start without its stop): their frees are
    // garbage reclaimed, which the reader dates by position.
    static constexpr size_t kCollectingThreads = 8;
    uint64_t collecting_[kCollectingThreads] = {};
    uint32_t collecting_untracked_ = 0;  // collections beyond that: every free is kept then
};

template <class R>
void TraceCompactor::put_record(const R& record) {
    static_assert(format::kMaxRecordBytesOf<R> <= sizeof record_, "a record of varints only");
    sink_(record_, format::put_record(record_, record));
}

}  // namespace growtrace::preload
