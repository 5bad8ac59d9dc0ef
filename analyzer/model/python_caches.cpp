#include "analyzer/model/python_caches.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "analyzer/model/growth_classifier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include "format/sampling.h"
#include "format/trace_format.h"

namespace growtrace {
namespace {

// Retained memory of a cache is binned this coarsely in ticks (~1.6 ms at 2.6 GHz): plenty for
// curves, and memory per cache stays proportional to the run's length, not to its events.
constexpr unsigned kRetainedBucketShift = 22;
// A cache's series are kept to about this many points: past twice as many, they are merged
// into coarser time steps (retained memory) or thinned to one point per step (entry counts).
constexpr size_t kMaxSeriesPoints = 4096;
constexpr size_t kMaxExampleKeys = 3;
// Distinct keys kept per cache to choose the examples from (see example_keys_for).
// A sampled trace writes only the first this many distinct descriptions of a cache's keys.
constexpr size_t kMaxCandidateKeys = 64;
static_assert(kMaxCandidateKeys == format::kSampledKeyDescriptionsPerCache);
constexpr int kQuarters = 4;

}  // namespace

// The value of a step series at time t (the last step at or before t; `initial` before any).
static double value_at(const std::vector<Step>& steps, double t, double initial) {
    double v = initial;
    for (const Step& s : steps) {
        if (s.t > t) break;
        v = s.value;
    }
    return v;
}

GrowthShape quarters(const std::vector<Step>& steps, double initial, double begin, double end) {
    GrowthShape shape;
    double previous = value_at(steps, begin, initial);
    double first = previous;
    for (int q = 1; q <= kQuarters; ++q) {
        double v = value_at(steps, begin + (end - begin) * q / kQuarters, initial);
        if (v > previous) ++shape.growing_quarters;
        if (q == kQuarters / 2) shape.second_half_growth = -v;
        previous = v;
    }
    shape.growth = previous - first;
    shape.second_half_growth += previous;
    return shape;
}

// The index of a cache's last entry count before a teardown that ends its series (docs/growth-
// classifier.md, "Teardown"), if it ends in one.
static std::optional<size_t> cache_teardown(const std::vector<Step>& steps, double begin, double end) {
    if (steps.size() < 2) return std::nullopt;
    std::vector<double> t, v;
    for (const Step& s : steps) {
        t.push_back(s.t);
        v.push_back(s.value);
    }
    t.push_back(std::max(end, steps.back().t));  // the count holds until the end of the work
    v.push_back(steps.back().value);
    const std::ptrdiff_t held = teardown_point(t, v, begin, 0);
    if (held < 0 || static_cast<size_t>(held) + 1 >= steps.size()) return std::nullopt;
    return static_cast<size_t>(held);
}

// The lowest live count in each quarter of [begin, end] of a step series starting at 0: what
// remains as the population is reclaimed, the level a growing one never falls back to.
std::vector<double> quarter_floors(const std::vector<Step>& steps, double begin, double end) {
    std::vector<double> floors;
    for (int q = 0; q < kQuarters; ++q) {
        const double a = begin + (end - begin) * q / kQuarters, b = begin + (end - begin) * (q + 1) / kQuarters;
        double low = value_at(steps, a, 0);
        for (const Step& s : steps)
            if (s.t > a && s.t <= b) low = std::min(low, s.value);
        floors.push_back(low);
    }
    return floors;
}

namespace {

std::string class_name(const TypeCreateRecord& t) {
    return t.module.empty() ? t.qualname : t.module + "." + t.qualname;
}

uint64_t most_frequent(const std::unordered_map<uint64_t, uint64_t>& counts) {
    uint64_t best = 0, best_count = 0;
    for (const auto& [key, count] : counts) {
        if (count > best_count || (count == best_count && key < best)) {
            best = key;
            best_count = count;
        }
    }
    return best;
}

}  // namespace

PythonTracker::Cache& PythonTracker::cache(uint64_t id) {
    Cache& c = caches_[id];
    c.info.cache_id = id;
    return c;
}

void PythonTracker::on_cache_create(const CacheCreateRecord& r) {
    Cache& c = cache(r.cache_id);
    c.info = r;  // a re-announcement (forked child) replaces the description
    c.samples.emplace_back(r.ticks, static_cast<int64_t>(r.entries));
}

void PythonTracker::on_cache_insert(const CacheInsertRecord& r) {
    if (r.phase != CacheInsertRecord::Begin) {
        if (auto it = open_misses_.find(r.tid); it != open_misses_.end()) {
            auto& open = it->second;
            for (size_t i = open.size(); i-- > 0;) {
                if (open[i].first == r.cache_id && open[i].second == r.insert_seq) {
                    open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
                    break;
                }
            }
            if (open.empty()) open_misses_.erase(it);  // a thread per request would keep them all
        }
        if (r.phase == CacheInsertRecord::Stored) {
            Cache& c = cache(r.cache_id);
            c.samples.emplace_back(r.ticks, -2);  // placeholder: entries_before + 1, fixed below
            compact_samples(c);
        }
        return;
    }
    auto& open = open_misses_[r.tid];
    open.emplace_back(r.cache_id, r.insert_seq);
    Cache& c = cache(r.cache_id);
    add_insertions(c, 1, r.ticks, r.ticks);
    c.samples.emplace_back(r.ticks, static_cast<int64_t>(r.entries_before));
    compact_samples(c);
    ++c.inserting_stacks[r.stack_id];
    if (c.example_keys.size() < kMaxCandidateKeys &&
        std::find(c.example_keys.begin(), c.example_keys.end(), r.key_desc) == c.example_keys.end())
        c.example_keys.push_back(r.key_desc);
    if (!r.key_type_addresses.empty()) c.key_types.emplace_back(r.ticks, r.key_type_addresses);
}

void PythonTracker::add_insertions(Cache& c, uint64_t count, uint64_t first_ticks, uint64_t last_ticks) {
    if (count == 0) return;
    if (c.insertions == 0) c.first_insert = first_ticks;
    c.insertions += count;
    c.first_insert = std::min(c.first_insert, first_ticks);
    c.last_insert = std::max(c.last_insert, last_ticks);
}

// The misses a sampled trace's writer counted (caches with a maxsize) stand for the CacheInsert
// records it did not write: as many insertions, the same first and last, the same inserting
// stacks, and the entry counts at the first miss and after the last. No allocation is
// attributed to them: the writer counts only misses during which its thread made no sample.
void PythonTracker::on_cache_misses(const CacheMissesRecord& r) {
    for (const CacheMissCounts& m : r.caches) {
        if (m.misses == 0) continue;
        Cache& c = cache(m.cache_id);
        add_insertions(c, m.misses, m.first_ticks, m.last_ticks);
        c.samples.emplace_back(m.first_ticks, static_cast<int64_t>(m.first_entries_before));
        c.samples.emplace_back(m.last_ticks, static_cast<int64_t>(m.last_entries_after));
        compact_samples(c);
        for (const auto& [stack, n] : m.stacks) c.inserting_stacks[stack] += n;
    }
}

namespace {
// The keys to show: those naming the class that keeps missing under many identities first (for
// #2672 a key with ParsedResponseOutputMessage[Fact], not the first key the cache ever saw).
std::vector<std::string> example_keys_for(const std::vector<std::string>& candidates,
                                          const std::vector<CacheKeyType>& key_types) {
    std::vector<std::string> chosen;
    if (!key_types.empty() && key_types.front().distinct_classes >= 2) {
        for (const std::string& key : candidates)
            if (chosen.size() < kMaxExampleKeys && key.find(key_types.front().name) != std::string::npos)
                chosen.push_back(key);
    }
    for (const std::string& key : candidates)
        if (chosen.size() < kMaxExampleKeys && std::find(chosen.begin(), chosen.end(), key) == chosen.end())
            chosen.push_back(key);
    return chosen;
}
}  // namespace

void PythonTracker::on_cache_size(const CacheSizeRecord& r) {
    for (const auto& [id, entries] : r.entries) {
        Cache& c = cache(id);
        // A destroyed cache (-1) holds nothing from then on.
        c.samples.emplace_back(r.ticks, std::max<int64_t>(entries, 0));
        compact_samples(c);
    }
}

namespace {
// The entry counts of a series in tick order: a Stored marker (-2) is one more than the point
// before it. Points with equal ticks keep their order in the file (a thread's miss, then its
// store; a sampled trace puts thread events on a coarse time grid, so ties are common).
void resolve_counts(std::vector<std::pair<uint64_t, int64_t>>& samples) {
    std::stable_sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    int64_t current = 0;
    for (auto& [ticks, entries] : samples) {
        current = entries == -2 ? current + 1 : entries;
        entries = current;
    }
}
}  // namespace

void PythonTracker::compact_samples(Cache& c) {
    if (c.samples.size() <= 2 * kMaxSeriesPoints) return;
    resolve_counts(c.samples);
    // One point per step of time (the last in it), and the first point of all.
    const uint64_t first = c.samples.front().first, last = c.samples.back().first;
    const uint64_t step = std::max<uint64_t>(1, (last - first) / kMaxSeriesPoints + 1);
    std::vector<std::pair<uint64_t, int64_t>> kept{c.samples.front()};
    for (size_t i = 1; i < c.samples.size(); ++i) {
        const bool last_of_step = i + 1 == c.samples.size() ||
                                  (c.samples[i + 1].first - first) / step != (c.samples[i].first - first) / step;
        if (last_of_step) kept.push_back(c.samples[i]);
    }
    c.samples = std::move(kept);
}

void PythonTracker::on_type_create(const TypeCreateRecord& r) {
    types_.push_back({r, 0});
    size_t index = types_.size() - 1;
    if (r.allocation_seq) type_by_allocation_[r.allocation_seq] = index;
    types_by_address_[r.address].push_back(index);
}

void PythonTracker::add_retained(Cache& c, uint64_t ticks, double bytes) {
    uint64_t bucket = ticks >> (kRetainedBucketShift + c.retained_shift);
    if (!c.retained_deltas.empty() && c.retained_deltas.back().first == bucket) {
        c.retained_deltas.back().second += bytes;
        return;
    }
    c.retained_deltas.emplace_back(bucket, bytes);
    if (c.retained_deltas.size() <= 2 * kMaxSeriesPoints) return;
    // Twice coarser, until few enough: memory follows the run's length only logarithmically.
    std::sort(c.retained_deltas.begin(), c.retained_deltas.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    while (c.retained_deltas.size() > kMaxSeriesPoints) {
        ++c.retained_shift;
        size_t out = 0;
        for (size_t i = 0; i < c.retained_deltas.size(); ++i) {
            const uint64_t b = c.retained_deltas[i].first >> 1;
            if (out && c.retained_deltas[out - 1].first == b) c.retained_deltas[out - 1].second += c.retained_deltas[i].second;
            else c.retained_deltas[out++] = {b, c.retained_deltas[i].second};
        }
        c.retained_deltas.resize(out);
    }
}

void PythonTracker::on_alloc_compact(const AllocCompactEvent& e) {
    auto it = open_misses_.find(e.tid);
    if (it == open_misses_.end() || it->second.empty()) return;
    uint64_t id = it->second.back().first;
    const format::SampleWeight w = format::sample_weight(e.size, sample_period_);
    if (w.count <= 0) return;  // a weightless record (sampled traces: a class object followed for its free)
    tagged_.insert(e.seq, Tag{id, e.size, e.stack_id});
    live_by_cache_stack_[{id, e.stack_id}] += w.bytes;
    Cache& c = cache(id);
    c.live_bytes += w.bytes;
    c.live_count += w.count;
    c.live_variance += w.variance;
    ++c.live_samples;
    add_retained(c, e.ticks, w.bytes);
}

void PythonTracker::on_free_compact(const FreeCompactEvent& e) {
    if (auto t = type_by_allocation_.find(e.seq); t != type_by_allocation_.end()) {
        types_[t->second].death_ticks = std::max<uint64_t>(e.ticks, 1);
        type_by_allocation_.erase(t);
    }
    Tag tag;
    if (!tagged_.take(e.seq, tag)) return;
    Cache& c = cache(tag.cache_id);
    const format::SampleWeight w = format::sample_weight(tag.size, sample_period_);
    c.live_bytes -= w.bytes;
    c.live_count -= w.count;
    c.live_variance -= w.variance;
    --c.live_samples;
    if (sample_period_) c.sample_free_ticks.push_back(e.ticks);
    add_retained(c, e.ticks, -w.bytes);
    live_by_cache_stack_[{tag.cache_id, tag.stack_id}] -= w.bytes;
}

uint64_t PythonTracker::live_cache_bytes(uint64_t cache_id, uint64_t stack_id) const {
    auto it = live_by_cache_stack_.find({cache_id, stack_id});
    return it == live_by_cache_stack_.end() || it->second <= 0 ? 0 : static_cast<uint64_t>(std::llround(it->second));
}

std::vector<Step> on_work_axis(const std::vector<Step>& steps, const std::function<double(double)>& work_at) {
    std::vector<Step> out = steps;
    for (Step& s : out) s.t = work_at(s.t);
    return out;
}

// Each address's classes in creation order (ticks, then file order): a key's class is then
// found by binary search (a long run reuses addresses for thousands of classes, and looks up a
// key's classes for every miss of every cache).
void PythonTracker::sort_classes_by_address() {
    for (auto& [address, indices] : types_by_address_)
        std::stable_sort(indices.begin(), indices.end(),
                         [&](size_t a, size_t b) { return types_[a].info.ticks < types_[b].info.ticks; });
}

// The class at an address when a key held it: the latest one created before; failing that the
// first reported after, since a garbage-collector scan (the static build's source) reports a
// class at the next collection, after it may already be in a key.
const PythonTracker::ClassRecord* PythonTracker::class_at(uint64_t address, uint64_t ticks) const {
    auto it = types_by_address_.find(address);
    if (it == types_by_address_.end()) return nullptr;
    const std::vector<size_t>& v = it->second;
    auto by_ticks = [&](uint64_t t, size_t i) { return t < types_[i].info.ticks; };
    auto next = std::upper_bound(v.begin(), v.end(), ticks, by_ticks);
    if (next != v.begin()) {
        // The latest at or before: the first of those created at that same tick.
        const uint64_t latest = types_[*std::prev(next)].info.ticks;
        auto first = std::lower_bound(v.begin(), next, latest, [&](size_t i, uint64_t t) { return types_[i].info.ticks < t; });
        return &types_[*first];
    }
    return next != v.end() ? &types_[*next] : nullptr;
}

CacheFinding PythonTracker::cache_finding(uint64_t id, Cache& c, const Seconds& seconds, double work_end_s) const {
    // Stored markers carry no count: they stand for "one more than at the miss".
    resolve_counts(c.samples);
    // What a cache held after the shutdown mark (its module torn down, its dict freed) says
    // nothing of what the program made of it.
    std::erase_if(c.samples, [&](const auto& sample) { return after_exit(sample.first); });
    std::vector<Step> steps;
    for (const auto& [ticks, entries] : c.samples) steps.push_back({seconds(ticks), static_cast<double>(entries)});
    CacheFinding f;
    f.cache_id = id;
    f.wrapped = c.info.module.empty() ? c.info.qualname : c.info.module + "." + c.info.qualname;
    f.bound_names = c.info.bound_names;
    f.name = f.bound_names.empty() ? f.wrapped : f.bound_names.front();
    f.location = c.info.creator_file.empty() ? "" : c.info.creator_file + ":" + std::to_string(c.info.creator_line);
    f.maxsize = c.info.maxsize;
    f.insertions = c.insertions;
    f.entries_first = steps.empty() ? 0 : static_cast<uint64_t>(steps.front().value);
    f.entries_last = steps.empty() ? 0 : static_cast<uint64_t>(steps.back().value);
    f.inserted_from_stack = most_frequent(c.inserting_stacks);
    f.retained_bytes = c.live_bytes > 0 ? static_cast<uint64_t>(std::llround(c.live_bytes)) : 0;
    f.live_allocations = c.live_count > 0 ? static_cast<uint64_t>(std::llround(c.live_count)) : 0;
    f.retained_samples = c.live_samples;
    f.retained_bytes_stderr = std::sqrt(std::max(0.0, c.live_variance));
    for (const Step& s : steps) f.entries_over_time.push_back({s.t, s.value});
    std::sort(c.retained_deltas.begin(), c.retained_deltas.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    double running = 0;
    for (const auto& [bucket, delta] : c.retained_deltas) {
        running += delta;
        f.retained_over_time.push_back(
            {seconds(bucket << (kRetainedBucketShift + c.retained_shift)), std::max(0.0, running)});
    }
    judge_cache(c, steps, seconds, work_end_s, f);
    f.key_types = key_types_of(c);
    f.example_keys = example_keys_for(c.example_keys, f.key_types);
    return f;
}

// The cache's verdict and rates, judged on its entries by quarters of the program's work while
// it was used (before a teardown at the very end, if any).
void PythonTracker::judge_cache(const Cache& c, std::vector<Step>& steps, const Seconds& seconds, double work_end_s,
                                CacheFinding& f) const {
    // Sampled: with fewer than two live samples the memory its entries hold cannot be told from
    // nothing (a sample stands for sample_period_ bytes), unless even three samples' worth
    // would be too little to matter.
    uint64_t live_samples = c.live_samples;  // before a teardown, if any (below)
    double begin = seconds(c.first_insert), last = std::min(seconds(c.last_insert), work_end_s);
    double end = std::max(work_end_s, last);
    // Emptied at the very end of the work (cache_clear(), an atexit handler): judged on the run
    // before, with the memory its entries held then.
    double retained = static_cast<double>(f.retained_bytes);
    if (const auto torn = cache_teardown(on_work_axis(steps, work_at_), work_at_(begin), work_at_(end))) {
        f.entries_before_teardown = static_cast<uint64_t>(steps[*torn].value);
        f.teardown_at_s = steps[*torn + 1].t;
        // Frees are timed to the trace's quantum, rounded down, and binned (retained_over_time)
        // at their bin's start, the entry counts exactly: the frees of a clear() right after the
        // last insertion can show a hair before it. What the entries held is their peak before
        // the count fell; the samples freed are counted from that slack before it.
        const uint64_t slack = 2 * static_cast<uint64_t>(format::kSampledTimeQuantumTicks) +
                               (uint64_t{2} << (kRetainedBucketShift + c.retained_shift));
        const double slack_s = seconds(c.first_insert + slack) - seconds(c.first_insert);
        for (const SeriesPoint& p : f.retained_over_time)
            if (p.t_s <= f.teardown_at_s) retained = std::max(retained, p.value);
        f.released_at_teardown_bytes = static_cast<uint64_t>(std::llround(retained)) - f.retained_bytes;
        for (uint64_t ticks : c.sample_free_ticks) live_samples += seconds(ticks) + slack_s > steps[*torn].t;
        steps.resize(*torn + 1);
        end = f.teardown_at_s;
        last = std::min(last, end);
    }
    const bool memory_unknown =
        sample_period_ && live_samples < 2 && 3.0 * static_cast<double>(sample_period_) >= kMinSignificantBytes;
    double span = std::max(end - begin, 1e-6);
    f.started_at_s = begin;
    const double work_begin = work_at_(begin), work_end = work_at_(end);
    GrowthShape shape = quarters(on_work_axis(steps, work_at_), static_cast<double>(f.entries_first), work_begin, work_end);
    f.growth_entries_per_s = shape.growth / span;
    f.growth_bytes_per_s = retained / span;
    bool late = work_at_(last) >= work_begin + (work_end - work_begin) / 2;
    if (f.maxsize >= 0) {
        // An LRU with a maxsize evicts: its entry count, and so its memory, has a bound however
        // many keys it is fed, even when the run ends before it fills.
        f.reason = "bounded by its maxsize of " + std::to_string(f.maxsize) + " entries (" +
                   std::to_string(f.entries_last) + " at the end)";
    } else if (shape.growth < static_cast<double>(kMinCacheGrowthEntries)) {
        f.reason = "grew by " + std::to_string(static_cast<int64_t>(shape.growth)) + " entries only";
    } else if (!memory_unknown && retained < kMinSignificantBytes) {
        f.reason = "holds only " + std::to_string(std::llround(retained)) + " bytes";
    } else if (shape.growing_quarters < kMinGrowingQuarters || !late) {
        f.reason = "filled early and then stopped growing (growth in " + std::to_string(shape.growing_quarters) +
                   " of 4 quarters of the run)";
    } else if (shape.second_half_growth < static_cast<double>(kMinLateCacheGrowthEntries)) {
        f.reason = "filled early: " + std::to_string(std::llround(shape.second_half_growth)) + " of its " +
                   std::to_string(static_cast<int64_t>(shape.growth)) +
                   " entries came in the second half of the run (new keys met late, not growth)";
    } else if (memory_unknown) {
        f.undetermined = true;
        f.reason = "entries keep rising (growth in " + std::to_string(shape.growing_quarters) +
                   " of 4 quarters), maxsize unbounded, but too thinly sampled to tell how much memory they hold (" +
                   std::to_string(live_samples) + " live sample" + (live_samples == 1 ? "" : "s") + ", one per " +
                   std::to_string(sample_period_) + " bytes allocated)";
    } else {
        f.unbounded = true;
        f.reason = "entries keep rising through the run (growth in " + std::to_string(shape.growing_quarters) +
                   " of 4 quarters), maxsize unbounded";
        f.confidence = std::min(1.0, 0.25 * shape.growing_quarters) *
                       std::min(1.0, shape.growth / (4.0 * kMinCacheGrowthEntries));
    }
}

// Key types: each class object found in keys, by name; alive if never freed. Most distinct
// classes first.
std::vector<CacheKeyType> PythonTracker::key_types_of(const Cache& c) const {
    std::map<std::string, std::pair<std::set<uint64_t>, std::set<uint64_t>>> by_name;  // distinct, live
    for (const auto& [ticks, addresses] : c.key_types) {
        for (uint64_t address : addresses) {
            const ClassRecord* cls = class_at(address, ticks);
            if (!cls) continue;
            auto& sets = by_name[class_name(cls->info)];
            uint64_t identity = (cls->info.ticks << 1) ^ address;
            sets.first.insert(identity);
            if (cls->death_ticks == 0 || after_exit(cls->death_ticks)) sets.second.insert(identity);
        }
    }
    std::vector<CacheKeyType> out;
    for (const auto& [name, sets] : by_name) out.push_back({name, sets.first.size(), sets.second.size()});
    std::sort(out.begin(), out.end(),
              [](const CacheKeyType& a, const CacheKeyType& b) { return a.distinct_classes > b.distinct_classes; });
    return out;
}

// Classes of one qualified name: how many stay alive over time, judged by quarters of the work.
TypeFinding PythonTracker::type_finding(const std::string& name, const std::vector<const ClassRecord*>& classes,
                                        const Seconds& seconds, double end_s, double work_end_s) const {
    TypeFinding f;
    f.name = name;
    f.created = classes.size();
    std::vector<std::pair<double, int>> changes;
    std::unordered_map<uint64_t, uint64_t> stacks;
    double first = end_s;
    for (const ClassRecord* c : classes) {
        double born = seconds(c->info.ticks);
        first = std::min(first, born);
        changes.emplace_back(born, +1);
        // A class freed as garbage is dead from its allocation on, which precedes its creation.
        if (c->death_ticks && !after_exit(c->death_ticks)) changes.emplace_back(std::max(born, seconds(c->death_ticks)), -1);
        else ++f.live_at_end;
        ++stacks[c->info.stack_id];
    }
    // At one time, births first: a class that is garbage from the start never counts below 0.
    std::sort(changes.begin(), changes.end(),
              [](const auto& a, const auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<Step> steps;
    int live = 0;
    for (const auto& [t, d] : changes) {
        live += d;
        steps.push_back({t, static_cast<double>(live)});
        f.live_over_time.push_back({t, static_cast<double>(live)});
    }
    f.creation_stack = most_frequent(stacks);
    f.started_at_s = first;
    double span = std::max(work_end_s - first, 1e-6);
    const std::vector<Step> by_work = on_work_axis(steps, work_at_);
    GrowthShape shape = quarters(by_work, 0, work_at_(first), work_at_(work_end_s));
    // A population that keeps growing never falls back: the lowest count of each quarter (as of
    // the full collections, whose garbage is counted dead since the one before) rises from
    // quarter to quarter. Classes that die, however many are made, fall back.
    const std::vector<double> floors = quarter_floors(by_work, work_at_(first), work_at_(work_end_s));
    int rising = 0;
    for (size_t q = 1; q < floors.size(); ++q) rising += floors[q] > floors[q - 1];
    f.created_per_s = static_cast<double>(f.created) / span;
    if (f.live_at_end < kMinDuplicateLiveClasses) {
        f.reason = std::to_string(f.created) + " created, " + std::to_string(f.live_at_end) + " alive at the end";
    } else if (shape.growing_quarters < kMinGrowingQuarters) {
        f.reason = "live classes stopped increasing (growth in " + std::to_string(shape.growing_quarters) +
                   " of 4 quarters)";
    } else if (rising < kQuarters - 1 || floors.back() - floors.front() < kMinDuplicateLiveClasses / 2.0) {
        f.reason = fmt::format("live classes do not keep growing: the fewest alive in each quarter of the run were {}",
                               fmt::join(floors, ", "));
    } else {
        f.unbounded = true;
        f.reason = std::to_string(f.live_at_end) + " live classes named " + name + " and still being created";
        f.confidence = std::min(1.0, 0.25 * shape.growing_quarters) *
                       std::min(1.0, static_cast<double>(f.live_at_end) / (4.0 * kMinDuplicateLiveClasses));
    }
    return f;
}

PythonFindings PythonTracker::finish(const std::function<double(uint64_t)>& seconds, double end_s) {
    PythonFindings out;
    sort_classes_by_address();
    // The end of the program's work: the shutdown mark, else the end of the trace.
    const double work_end_s = work_end_ticks_ ? std::min(end_s, seconds(work_end_ticks_)) : end_s;
    for (auto& [id, c] : caches_)
        if (c.insertions) out.caches.push_back(cache_finding(id, c, seconds, work_end_s));
    std::sort(out.caches.begin(), out.caches.end(), [](const CacheFinding& a, const CacheFinding& b) {
        if (a.unbounded != b.unbounded) return a.unbounded;
        if (a.retained_bytes != b.retained_bytes) return a.retained_bytes > b.retained_bytes;
        // At equal memory (often none seen in a sampled trace), the caches that could grow
        // without limit come first, then the fuller ones: the report keeps only the first few.
        if ((a.maxsize < 0) != (b.maxsize < 0)) return a.maxsize < 0;
        return a.entries_last > b.entries_last;
    });

    std::map<std::string, std::vector<const ClassRecord*>> by_name;
    for (const ClassRecord& c : types_)
        if (!after_exit(c.info.ticks)) by_name[class_name(c.info)].push_back(&c);
    for (const auto& [name, classes] : by_name)
        if (classes.size() >= kMinTypeCreations) out.types.push_back(type_finding(name, classes, seconds, end_s, work_end_s));
    std::sort(out.types.begin(), out.types.end(), [](const TypeFinding& a, const TypeFinding& b) {
        if (a.unbounded != b.unbounded) return a.unbounded;
        return a.live_at_end > b.live_at_end;
    });
    return out;
}

}  // namespace growtrace
