#include "analyzer/model/retention.h"

#include <algorithm>

#include "format/sampling.h"
#include "format/trace_format.h"

namespace growtrace {

namespace {

void add_counts(WindowBin& to, const WindowBin& from) {
    to.births_bytes += from.births_bytes;
    to.deaths_bytes += from.deaths_bytes;
    to.births += from.births;
    to.deaths += from.deaths;
    to.death_samples += from.death_samples;
}

// w >> extra, defined for any extra: a corrupt or huge tick jump can ask for 32 or more.
uint32_t wider_window(uint32_t w, unsigned extra) { return extra >= 32 ? 0 : w >> extra; }

// Re-indexes sparse sorted bins for windows 2^extra times wider, merging neighbours.
template <typename Bin, typename Merge>
void rebin_sparse(std::vector<Bin>& bins, unsigned extra, Merge merge) {
    size_t out = 0;
    for (size_t i = 0; i < bins.size(); ++i) {
        Bin b = bins[i];
        b.window = wider_window(b.window, extra);
        if (out > 0 && bins[out - 1].window == b.window) merge(bins[out - 1], b);
        else bins[out++] = b;
    }
    bins.resize(out);
}

void rebin_window_bins(std::vector<WindowBin>& bins, unsigned extra) {
    rebin_sparse(bins, extra, [](WindowBin& to, const WindowBin& from) { add_counts(to, from); });
}

void rebin_survivors(std::vector<SurvivorBin>& bins, unsigned extra) {
    rebin_sparse(bins, extra, [](SurvivorBin& to, const SurvivorBin& from) {
        to.bytes += from.bytes;
        to.count += from.count;
    });
}

// Makes dense[w] exist; every bin of a dense vector carries its own index, which rebinning
// reads (a default bin would claim window 0).
void grow_dense(std::vector<WindowBin>& dense, uint32_t w) {
    if (dense.size() > w) return;
    size_t old = dense.size();
    dense.resize(size_t{w} + 1);
    for (size_t i = old; i < dense.size(); ++i) dense[i].window = static_cast<uint32_t>(i);
}

void rebin_dense(std::vector<WindowBin>& dense, unsigned extra) {
    std::vector<WindowBin> out;
    for (const WindowBin& b : dense) {
        const uint32_t w = wider_window(b.window, extra);
        grow_dense(out, w);
        add_counts(out[w], b);
    }
    dense = std::move(out);
}

}  // namespace

void add_to_bins(std::vector<WindowBin>& bins, const WindowBin& delta) {
    // Events mostly arrive in time order, so the last bin is the usual target.
    if (bins.empty() || bins.back().window < delta.window) {
        bins.push_back(delta);
        return;
    }
    if (bins.back().window == delta.window) {
        add_counts(bins.back(), delta);
        return;
    }
    auto it = std::lower_bound(bins.begin(), bins.end(), delta.window,
                               [](const WindowBin& b, uint32_t w) { return b.window < w; });
    if (it != bins.end() && it->window == delta.window) add_counts(*it, delta);
    else bins.insert(it, delta);
}

void RetentionResult::coarsen(unsigned extra) {
    if (extra == 0) return;
    shift += extra;
    for (StackRetention& s : stacks) {
        rebin_window_bins(s.bins, extra);
        rebin_survivors(s.survivors, extra);
    }
    rebin_dense(heap, extra);
    num_windows = num_windows == 0 ? 0 : wider_window(num_windows - 1, extra) + 1;
    heap.resize(num_windows);
    for (uint32_t w = 0; w < num_windows; ++w) heap[w].window = w;
}

uint32_t RetentionModel::window_of(uint64_t ticks) {
    const uint64_t rel = ticks < origin_ ? 0 : ticks - origin_;
    uint64_t index = rel >> shift_;
    if (index >= kMaxWindows) {
        grow_windows(rel);
        index = rel >> shift_;
    }
    return static_cast<uint32_t>(index);
}

void RetentionModel::grow_windows(uint64_t rel) {
    unsigned extra = 0;
    while ((rel >> (shift_ + extra)) >= kMaxWindows) ++extra;
    shift_ += extra;
    for (StackRetention& s : stacks_) rebin_window_bins(s.bins, extra);
    rebin_dense(heap_, extra);
}

uint32_t RetentionModel::stack_index(uint64_t stack_id) {
    const auto next = static_cast<uint32_t>(stacks_.size());
    bool inserted = false;
    uint32_t index = 0;
    if (stack_id < kDenseStackIds) {
        if (stack_id >= dense_stack_index_.size()) {
            const uint64_t doubled = std::min<uint64_t>(2 * dense_stack_index_.size(), kDenseStackIds);
            dense_stack_index_.resize(std::max<uint64_t>(stack_id + 1, doubled));
        }
        uint32_t& slot = dense_stack_index_[stack_id];
        inserted = slot == 0;
        if (inserted) slot = next + 1;
        index = slot - 1;
    } else {
        auto [it, added] = stack_index_.try_emplace(stack_id, next);
        inserted = added;
        index = it->second;
    }
    if (inserted) {
        stacks_.emplace_back();
        stacks_.back().stack_id = stack_id;
    }
    return index;
}

void RetentionModel::add_birth(uint32_t stack, uint64_t ticks, uint64_t size, uint64_t n) {
    const format::SampleWeight w = format::sample_weight(size, sample_period_);
    const double times = static_cast<double>(n);
    WindowBin d;
    d.window = window_of(ticks);
    d.births_bytes = w.bytes * times;
    d.births = w.count * times;
    add_to_bins(stacks_[stack].bins, d);
    grow_dense(heap_, d.window);
    add_counts(heap_[d.window], d);
    StackRetention& st = stacks_[stack];
    st.allocations += d.births;
    st.allocated_bytes += d.births_bytes;
    if (w.count > 0) st.samples += n;
}

void RetentionModel::add_death(uint32_t stack, uint64_t ticks, uint64_t size, uint64_t n) {
    const format::SampleWeight w = format::sample_weight(size, sample_period_);
    const double times = static_cast<double>(n);
    WindowBin d;
    d.window = window_of(ticks);
    d.deaths_bytes = w.bytes * times;
    d.deaths = w.count * times;
    d.death_samples = w.count > 0 ? static_cast<uint32_t>(n) : 0;
    add_to_bins(stacks_[stack].bins, d);
    grow_dense(heap_, d.window);
    add_counts(heap_[d.window], d);
    deaths_estimate_ += d.deaths;
}

void RetentionModel::add_survivor(uint32_t stack, uint64_t ticks, uint64_t size) {
    const format::SampleWeight w = format::sample_weight(size, sample_period_);
    StackRetention& st = stacks_[stack];
    st.live_bytes += w.bytes;
    st.live_count += w.count;
    st.live_bytes_variance += w.variance;
    if (w.count > 0) ++st.live_samples;
    st.survivors.push_back(SurvivorBin{window_of(ticks), w.bytes, w.count});
}

void RetentionModel::pair(Slot& alloc, uint64_t free_ticks) {
    add_death(alloc.stack, free_ticks, alloc.size);
    alloc.kind = SlotKind::Pair;
    alloc.free_ticks = free_ticks;
    alloc.epoch = epoch_;
}

namespace {

// The first slot with ticks > t.
template <typename Slots>
auto first_after(Slots& slots, uint64_t t) {
    return std::upper_bound(slots.begin(), slots.end(), t,
                            [](uint64_t v, const auto& s) { return v < s.ticks; });
}

}  // namespace

// Undoes add_death when a late event shows a pairing was wrong.
void RetentionModel::retract_death(uint32_t stack, uint64_t ticks, uint64_t size) {
    const uint32_t w = window_of(ticks);
    auto& bins = stacks_[stack].bins;
    auto it = std::lower_bound(bins.begin(), bins.end(), w,
                               [](const WindowBin& b, uint32_t v) { return b.window < v; });
    if (it == bins.end() || it->window != w || it->deaths <= 0) return;  // cannot happen
    const format::SampleWeight weight = format::sample_weight(size, sample_period_);
    it->deaths -= weight.count;
    it->deaths_bytes -= weight.bytes;
    if (weight.count > 0 && it->death_samples > 0) --it->death_samples;
    heap_[w].deaths -= weight.count;
    heap_[w].deaths_bytes -= weight.bytes;
    deaths_estimate_ -= weight.count;
}

// An allocation pairs with the free that immediately follows it at this address.
void RetentionModel::insert_alloc(Slots& slots, const Slot& alloc) {
    auto it = first_after(slots, alloc.ticks);
    if (it != slots.begin()) {
        Slot& before = *std::prev(it);
        if (before.kind == SlotKind::Pair && before.ticks < alloc.ticks && alloc.ticks < before.free_ticks) {
            // Landed inside a pair (a, f): f frees this allocation; a's free is yet to come.
            const uint64_t f = before.free_ticks;
            retract_death(before.stack, f, before.size);
            before.kind = SlotKind::Alloc;
            Slot moved = alloc;
            add_death(moved.stack, f, moved.size);
            moved.kind = SlotKind::Pair;
            moved.free_ticks = f;
            moved.epoch = epoch_;
            slots.insert(it, moved);
            return;
        }
    }
    if (it != slots.end() && it->kind == SlotKind::Free) {
        const uint64_t f = it->ticks;
        *it = alloc;
        pair(*it, f);
        ++totals_.matched_frees;
        return;
    }
    slots.insert(it, alloc);
}

// A free pairs with the allocation that immediately precedes it at this address.
void RetentionModel::insert_free(Slots& slots, uint64_t ticks) {
    auto it = first_after(slots, ticks);
    if (it != slots.begin()) {
        Slot& before = *std::prev(it);
        if (before.kind == SlotKind::Pair && before.ticks < ticks && ticks < before.free_ticks) {
            // Landed inside a pair (a, f): this free is a's; f frees an allocation yet to come.
            const uint64_t f = before.free_ticks;
            retract_death(before.stack, f, before.size);
            pair(before, ticks);
            Slot pending;
            pending.kind = SlotKind::Free;
            pending.ticks = f;
            slots.insert(it, pending);
            return;
        }
        if (before.kind == SlotKind::Alloc && before.ticks < ticks) {
            pair(before, ticks);
            ++totals_.matched_frees;
            return;
        }
    }
    Slot pending;
    pending.kind = SlotKind::Free;
    pending.ticks = ticks;
    slots.insert(it, pending);
}

void RetentionModel::enforce_cap(Slots& slots) {
    while (slots.size() > kMaxSlotsPerAddress) {
        // Old pairs only serve re-pairing: drop them first.
        auto pair_it = std::find_if(slots.begin(), slots.end(),
                                    [](const Slot& s) { return s.kind == SlotKind::Pair; });
        if (pair_it != slots.end()) {
            slots.erase(pair_it);
            continue;
        }
        if (slots[0].kind == SlotKind::Free) {
            ++totals_.unmatched_frees;
        } else {
            // The oldest allocation must have been freed by a path the tracer did not see
            // before the next one reused its address.
            add_death(slots[0].stack, slots[1].ticks, slots[0].size);
            ++totals_.untraced_reuses;
        }
        slots.erase(slots.begin());
    }
}

void RetentionModel::maybe_sweep() {
    if (++events_since_sweep_ < std::max<uint64_t>(kSweepEvents, addresses_.size())) return;
    events_since_sweep_ = 0;
    ++epoch_;
    for (auto it = addresses_.begin(); it != addresses_.end();) {
        Slots& slots = it.value();
        std::erase_if(slots, [&](const Slot& s) { return s.kind == SlotKind::Pair && s.epoch + 2 <= epoch_; });
        if (slots.empty()) it = addresses_.erase(it);
        else ++it;
    }
}

RetentionModel::Slot RetentionModel::birth(uint64_t stack_id, uint64_t ticks, uint64_t size) {
    max_ticks_ = std::max(max_ticks_, ticks);
    Slot alloc;
    alloc.ticks = ticks;
    alloc.size = size;
    alloc.stack = stack_index(stack_id);
    add_birth(alloc.stack, ticks, size);
    return alloc;
}

void RetentionModel::on_alloc(const AllocEvent& e) {
    const Slot alloc = birth(e.stack_id, e.ticks, e.size);
    Slots& slots = addresses_[e.addr];
    if (slots.empty()) {
        slots.push_back(alloc);
    } else {
        insert_alloc(slots, alloc);
        enforce_cap(slots);
    }
    maybe_sweep();
}

void RetentionModel::on_free(const FreeEvent& e) {
    ++free_records_;
    max_ticks_ = std::max(max_ticks_, e.ticks);
    // With no allocation yet, the free waits: the allocation may arrive later in the file
    // (another thread's run), or the memory was allocated before tracing started.
    Slots& slots = addresses_[e.addr];
    insert_free(slots, e.ticks);
    enforce_cap(slots);
    maybe_sweep();
}

void RetentionModel::on_alloc_compact(const AllocCompactEvent& e) {
    const Slot s = birth(e.stack_id, e.ticks, e.size);
    compact_live_.insert(e.seq, LiveCompact{s.ticks, s.size, s.stack});
}

uint64_t RetentionModel::live_stack_id(uint64_t seq) const {
    const LiveCompact* s = compact_live_.find(seq);
    return s ? stacks_[s->stack].stack_id : 0;
}

uint64_t RetentionModel::on_free_compact(const FreeCompactEvent& e) { return free_compact(e, false, 0); }

uint64_t RetentionModel::on_garbage_free_compact(const FreeCompactEvent& e, uint64_t floor_ticks) {
    return free_compact(e, true, floor_ticks);
}

uint64_t RetentionModel::free_compact(const FreeCompactEvent& e, bool garbage, uint64_t floor_ticks) {
    ++free_records_;
    max_ticks_ = std::max(max_ticks_, e.ticks);
    LiveCompact s;
    if (!compact_live_.take(e.seq, s)) {
        ++totals_.unmatched_frees;  // freed twice by a corrupt trace: never count it again
        return 0;
    }
    // Different threads' clocks may disagree slightly; a death is never before its birth.
    uint64_t death = std::max(e.ticks, s.ticks);
    if (garbage) {
        death = std::max(s.ticks, std::min(death, floor_ticks));
        const format::SampleWeight w = format::sample_weight(s.size, sample_period_);
        totals_.garbage_frees += w.count;
        totals_.garbage_bytes += w.bytes;
    }
    add_death(s.stack, death, s.size);
    ++totals_.matched_frees;
    return death;
}

// The writer counts a sample only when it was born and dead within a window as narrow as any
// this model can end up with: never more windows than the writer assumed.
static_assert(RetentionModel::kMaxWindows <= format::kShortLivedReaderWindows);

void RetentionModel::on_short_lived(const ShortLivedSamplesRecord& r) {
    max_ticks_ = std::max(max_ticks_, r.last_ticks);
    window_of(r.last_ticks);  // the windows the writer counted on, before any bin is added
    for (const ShortLivedGroup& g : r.groups) {
        if (!g.count) continue;
        const uint32_t stack = stack_index(g.stack_id);
        add_birth(stack, g.ticks, g.size, g.count);
        add_death(stack, g.ticks, g.size, g.count);
        free_records_ += g.count;
        totals_.matched_frees += g.count;
    }
}

RetentionResult RetentionModel::finish() {
    RetentionResult r;
    r.origin_ticks = origin_;
    const uint32_t last_window = window_of(std::max(max_ticks_, origin_));

    for (const auto& [addr, slots] : addresses_) {
        for (size_t i = 0; i < slots.size(); ++i) {
            const Slot& s = slots[i];
            if (s.kind == SlotKind::Pair) continue;
            if (s.kind == SlotKind::Free) {
                ++totals_.unmatched_frees;
                continue;
            }
            if (i + 1 < slots.size()) {
                // A later allocation reused the address: this one's free was never traced.
                add_death(s.stack, slots[i + 1].ticks, s.size);
                ++totals_.untraced_reuses;
                continue;
            }
            add_survivor(s.stack, s.ticks, s.size);
        }
    }
    addresses_ = {};
    compact_live_.for_each([&](uint64_t, const LiveCompact& s) { add_survivor(s.stack, s.ticks, s.size); });
    compact_live_.clear();

    for (StackRetention& st : stacks_) {
        std::sort(st.survivors.begin(), st.survivors.end(),
                  [](const SurvivorBin& a, const SurvivorBin& b) { return a.window < b.window; });
        rebin_survivors(st.survivors, 0);
        totals_.retained_bytes += st.live_bytes;
        totals_.live_allocations += st.live_count;
        totals_.allocations += st.allocations;
        totals_.samples += st.samples;
        totals_.live_samples += st.live_samples;
    }
    // A full trace counts its Free records (frees of memory allocated before tracing too); a
    // sampled one can only estimate the frees of what it sampled.
    totals_.frees = sample_period_ ? deaths_estimate_ : static_cast<double>(free_records_);

    r.shift = shift_;
    r.num_windows = last_window + 1;
    heap_.resize(r.num_windows);
    for (uint32_t w = 0; w < r.num_windows; ++w) heap_[w].window = w;
    // Peak of the traced heap at window ends. Within a window the true peak may be higher; the
    // window is the resolution at which delivery order cannot change the answer.
    double level = 0;
    for (const WindowBin& b : heap_) {
        level += b.births_bytes - b.deaths_bytes;
        totals_.peak_bytes = std::max(totals_.peak_bytes, level);
    }
    r.heap = std::move(heap_);
    r.stacks = std::move(stacks_);
    r.totals = totals_;
    stack_index_.clear();
    dense_stack_index_.clear();
    heap_.clear();
    stacks_.clear();
    totals_ = {};
    free_records_ = 0;
    deaths_estimate_ = 0;
    return r;
}

}  // namespace growtrace
