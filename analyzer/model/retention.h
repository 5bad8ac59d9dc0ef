// The retention model: matches frees to allocations and counts births and deaths per
// (allocation stack, time window). Counting per window rather than replaying a timeline makes
// the result independent of the order in which threads' runs arrive in the file, and keeps
// memory proportional to live allocations + distinct stacks x windows, never to events.
//
// Windows are powers of two of ticks wide, counted from the process start. When events reach
// past kMaxWindows windows the width doubles and neighbouring windows are merged, so a run of
// any length ends up with between kMaxWindows/2 and kMaxWindows windows.
//
// Counts and bytes are estimates: in a sampled trace (format v3, Sampling record) each
// allocation record is a sample that stands for 1/p allocations and size/p bytes
// (format/sampling.h); in a full trace for itself, and the figures are exact (whole numbers,
// held in doubles, which are exact up to 2^53).
#pragma once

#include <cstdint>
#include <vector>

#include "analyzer/model/flat_map.h"
#include "analyzer/model/live_by_sequence.h"

#include "analyzer/read/records.h"

namespace growtrace {

struct WindowBin {
    uint32_t window = 0;
    // Allocation records among the deaths (sampled traces: the samples that died; a full trace:
    // the deaths). Counts the samples a group held before a teardown.
    uint32_t death_samples = 0;
    double births_bytes = 0;
    double deaths_bytes = 0;
    double births = 0;
    double deaths = 0;
};

// Allocations still live at the end, by the window they were born in.
struct SurvivorBin {
    uint32_t window = 0;
    double bytes = 0;
    double count = 0;
};

struct StackRetention {
    uint64_t stack_id = 0;
    std::vector<WindowBin> bins;          // sparse, sorted by window
    std::vector<SurvivorBin> survivors;   // sparse, sorted by window; filled by finish()
    double allocations = 0;
    double allocated_bytes = 0;
    double live_bytes = 0;   // at the end of the trace
    double live_count = 0;
    // Allocation records behind these figures (== allocations in a full trace), those still
    // live at the end, and the variance of live_bytes as an estimate (0 in a full trace).
    uint64_t samples = 0;
    uint64_t live_samples = 0;
    double live_bytes_variance = 0;
};

struct RetentionTotals {
    double allocations = 0;
    double frees = 0;               // Free records (a sampled trace: the frees of samples, estimated)
    uint64_t matched_frees = 0;     // Free records of allocations seen in the trace
    uint64_t unmatched_frees = 0;   // frees of memory allocated before tracing started
    uint64_t untraced_reuses = 0;   // an address allocated twice with no free seen in between
    double peak_bytes = 0;          // traced heap, sampled at window ends
    double retained_bytes = 0;      // traced heap at the end
    double live_allocations = 0;
    uint64_t samples = 0;           // allocation records (the allocations of a full trace)
    uint64_t live_samples = 0;
    // Frees made inside full collections of the program's garbage collector, and their bytes
    // (estimates in a sampled trace): garbage reclaimed, counted as held no longer than since
    // the previous full collection (see on_free_compact).
    double garbage_frees = 0;
    double garbage_bytes = 0;
};

struct RetentionResult {
    uint64_t origin_ticks = 0;
    unsigned shift = 0;          // window width = 1 << shift ticks
    uint32_t num_windows = 0;    // windows 0 .. num_windows-1 cover every event
    std::vector<StackRetention> stacks;
    std::vector<WindowBin> heap;  // dense: heap[w] sums all stacks in window w
    RetentionTotals totals;

    uint64_t window_ticks() const { return uint64_t{1} << shift; }
    // Merges windows so that they are 2^extra times wider (e.g. to reach a minimum duration).
    void coarsen(unsigned extra);
};

class RetentionModel {
public:
    // At most this many windows are kept per stack; see the header comment.
    static constexpr uint32_t kMaxWindows = 512;
    // An address normally has one live allocation or one free waiting for its allocation.
    // More means frees the tracer did not see (or a corrupt trace); beyond this many the
    // oldest entries are resolved early so a broken trace cannot grow memory without limit.
    static constexpr size_t kMaxSlotsPerAddress = 8;
    // Matched pairs are dropped by a sweep every max(kSweepEvents, addresses) events, once they
    // are at least one sweep interval old. That bounds memory by live allocations plus the
    // recent past, while covering the delay with which another thread's run can arrive.
    static constexpr uint64_t kSweepEvents = 1u << 18;

    explicit RetentionModel(uint64_t origin_ticks = 0) : origin_(origin_ticks) {}
    // Sets the tick at which window 0 starts (the Process record's start_ticks). Only valid
    // before the first event.
    void set_origin(uint64_t ticks) { origin_ = ticks; }
    // The trace's Sampling record: mean bytes between samples, 0 = every allocation. Only
    // valid before the first event.
    void set_sample_period(uint64_t bytes) { sample_period_ = bytes; }

    void on_alloc(const AllocEvent& e);
    void on_free(const FreeEvent& e);
    // Version 2 events: already matched by the writer, so no address bookkeeping.
    void on_alloc_compact(const AllocCompactEvent& e);
    // Returns the ticks at which the death was counted (0: the allocation is unknown).
    uint64_t on_free_compact(const FreeCompactEvent& e);
    // A free made inside a full collection of the program's garbage collector: the block was
    // garbage, unreachable since some moment after `floor_ticks` (the end of the previous full
    // collection, 0 if none), which it survived if it was born before. Its death is counted at
    // max(birth, floor_ticks), so that the retained level as of every full collection is exact
    // and garbage awaiting a collection is never counted as held. Version 1 frees (addresses)
    // have no such variant: the writer has long written version 2 events.
    uint64_t on_garbage_free_compact(const FreeCompactEvent& e, uint64_t floor_ticks);
    // Samples the writer counted (version 6): each born and dead within the interval starting
    // at its group's ticks, so within one window here (the writer picked intervals no wider
    // than this model's windows can be once they reach last_ticks). Counted at those ticks as
    // the births and deaths their records would have given.
    void on_short_lived(const ShortLivedSamplesRecord& r);

    // The stack of a live version-2 allocation, by sequence number (0 if none is live).
    uint64_t live_stack_id(uint64_t seq) const;

    // Resolves what is still open (pending frees, live allocations) and returns the result.
    // The model is empty afterwards.
    RetentionResult finish();

    uint64_t max_ticks() const { return max_ticks_; }

private:
    // One entry of an address, in tick order: a live allocation, a free still waiting for
    // its allocation, or a recently matched allocation/free pair. Matched pairs are kept for a
    // while (see sweep()) so that a late event landing inside one can re-pair: an allocation
    // at ticks b inside pair (a, f) means f belonged to b and a's free is still to come.
    enum class SlotKind : uint8_t { Alloc, Free, Pair };
    struct Slot {
        uint64_t ticks = 0;       // allocation ticks (Alloc, Pair) or free ticks (Free)
        uint64_t free_ticks = 0;  // Pair only
        uint64_t size = 0;
        uint32_t stack = 0;       // index into stacks_
        uint32_t epoch = 0;       // sweep epoch in which a Pair was formed
        SlotKind kind = SlotKind::Alloc;
    };
    using Slots = std::vector<Slot>;
    // A live allocation of a version-2 trace (known by its sequence number, not its address).
    struct LiveCompact {
        uint64_t ticks = 0;
        uint64_t size = 0;
        uint32_t stack = 0;
    };

    // Counts a new allocation and returns its live slot (kept by address or by sequence).
    Slot birth(uint64_t stack_id, uint64_t ticks, uint64_t size);
    uint32_t window_of(uint64_t ticks);
    uint32_t stack_index(uint64_t stack_id);
    // `n` allocations of `size` bytes born (or dead) at `ticks`.
    void add_birth(uint32_t stack, uint64_t ticks, uint64_t size, uint64_t n = 1);
    void add_death(uint32_t stack, uint64_t ticks, uint64_t size, uint64_t n = 1);
    void add_survivor(uint32_t stack, uint64_t ticks, uint64_t size);
    void retract_death(uint32_t stack, uint64_t ticks, uint64_t size);
    void grow_windows(uint64_t needed_index);
    void insert_alloc(Slots& slots, const Slot& alloc);
    void insert_free(Slots& slots, uint64_t ticks);
    void enforce_cap(Slots& slots);
    void pair(Slot& alloc, uint64_t free_ticks);
    void maybe_sweep();
    uint64_t free_compact(const FreeCompactEvent& e, bool garbage, uint64_t floor_ticks);

    uint64_t origin_ = 0;
    uint64_t sample_period_ = 0;
    uint64_t free_records_ = 0;
    double deaths_estimate_ = 0;
    unsigned shift_ = 0;
    uint64_t max_ticks_ = 0;
    std::vector<StackRetention> stacks_;
    // stacks_ index + 1 by stack id (0: not seen yet). The tracer numbers its stacks from 1 up,
    // so a vector; ids beyond kDenseStackIds (a corrupt trace, or a merged id space) go to the
    // map.
    static constexpr uint64_t kDenseStackIds = uint64_t{1} << 24;
    std::vector<uint32_t> dense_stack_index_;
    U64Map<uint32_t> stack_index_;
    U64Map<Slots> addresses_;
    LiveBySequence<LiveCompact> compact_live_;
    uint32_t epoch_ = 0;
    uint64_t events_since_sweep_ = 0;
    std::vector<WindowBin> heap_;
    RetentionTotals totals_;
};

// Adds counts into a sparse, window-sorted bin vector.
void add_to_bins(std::vector<WindowBin>& bins, const WindowBin& delta);

}  // namespace growtrace
