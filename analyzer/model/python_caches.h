// CPython-level findings: functools.lru_cache caches that never stop filling, and classes
// with one qualified name that keep being created and stay alive.
//
// The tracker follows the agent's records alongside the allocation events: every allocation a
// thread makes between the start and the end of a cache miss is memory computed for that
// entry (innermost open miss wins), so what survives of it is what the cache holds. A cache is
// a finding when it has no maxsize and its entry count keeps rising over the run (not only
// while it first fills) and it holds a significant amount; one with a maxsize, or that stops
// growing once its keys are all in, is not, however much memory it holds. docs/growth-classifier.md explains the rules.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/model/flat_map.h"
#include "analyzer/model/live_by_sequence.h"
#include "analyzer/read/python_records.h"
#include "analyzer/read/records.h"

namespace growtrace {

struct SeriesPoint {
    double t_s = 0;
    double value = 0;
};

// A series of counts as steps in time, and how it moved over the four quarters of a span: the
// cache and container judgements share these.
struct Step {
    double t;
    double value;
};
struct GrowthShape {
    int growing_quarters = 0;
    double growth = 0;
    double second_half_growth = 0;  // of the growth, what the last two quarters added
};
GrowthShape quarters(const std::vector<Step>& steps, double initial, double begin, double end);
// The steps with each time mapped to the program's work done by then (work_axis.h).
std::vector<Step> on_work_axis(const std::vector<Step>& steps, const std::function<double(double)>& work_at);
// A count (cache or container entries) is growing when it grew in at least this many of the
// four quarters of its active span, the latest growth in its second half: one that only fills
// at start-up is not.
inline constexpr int kMinGrowingQuarters = 3;
// The lowest count in each quarter of [begin, end] (0 before the series starts).
std::vector<double> quarter_floors(const std::vector<Step>& steps, double begin, double end);

struct CacheKeyType {
    std::string name;            // module.qualname of a class found in keys
    uint64_t distinct_classes = 0;  // different class objects with that name in keys
    uint64_t live_classes = 0;      // of those, alive at the end of the trace
};

struct CacheFinding {
    uint64_t cache_id = 0;
    std::string name;     // the global name it is bound to, else module.qualname
    std::string wrapped;  // module.qualname of the wrapped callable
    std::vector<std::string> bound_names;
    std::string location;  // file:line where lru_cache(...) ran
    int64_t maxsize = -1;
    uint64_t entries_first = 0;
    uint64_t entries_last = 0;
    uint64_t insertions = 0;
    uint64_t inserted_from_stack = 0;  // most frequent inserting stack id
    uint64_t retained_bytes = 0;       // memory computed for entries, alive at the end
    uint64_t live_allocations = 0;
    // Sampled traces: the live samples behind retained_bytes, and its standard error.
    uint64_t retained_samples = 0;
    double retained_bytes_stderr = 0;
    bool undetermined = false;  // too thinly sampled to judge (reason says why)
    double growth_entries_per_s = 0;
    double growth_bytes_per_s = 0;
    double started_at_s = 0;
    double confidence = 0;
    bool unbounded = false;
    std::string reason;
    std::vector<CacheKeyType> key_types;
    std::vector<std::string> example_keys;  // up to 3, naming the most repeated key class first
    std::vector<SeriesPoint> entries_over_time;
    std::vector<SeriesPoint> retained_over_time;
    // Emptied at the very end of the work (cache_clear() at the end of a script, an atexit
    // handler): judged on its series before; what it then held and released, and when (0 none).
    uint64_t entries_before_teardown = 0;
    uint64_t released_at_teardown_bytes = 0;
    double teardown_at_s = 0;
};

struct TypeFinding {
    std::string name;  // module.qualname
    uint64_t created = 0;
    uint64_t live_at_end = 0;
    uint64_t creation_stack = 0;  // most frequent creating stack id (0 unknown)
    double created_per_s = 0;
    double started_at_s = 0;
    double confidence = 0;
    bool unbounded = false;
    std::string reason;
    std::vector<SeriesPoint> live_over_time;
};

struct PythonFindings {
    std::vector<CacheFinding> caches;  // every announced cache with insertions; unbounded first
    std::vector<TypeFinding> types;    // names created at least kMinTypeCreations times
};

class PythonTracker {
public:
    // The trace's Sampling record (mean bytes between samples, 0 = every allocation): what
    // each allocation stands for (format/sampling.h). Before the first event.
    void set_sample_period(uint64_t bytes) { sample_period_ = bytes; }
    // The shutdown mark (Exiting record): nothing recorded after it (cache sizes, misses, class
    // creations and deaths) decides a verdict. 0: no mark. `work_end` (0: the mark) is where the
    // program's work ended, the start of the agent's full collection just before the mark.
    void set_exit_ticks(uint64_t ticks, uint64_t work_end = 0) {
        exit_ticks_ = ticks;
        work_end_ticks_ = work_end ? work_end : ticks;
    }
    // The program's work by time (work_axis.h): a cache's entries and a class population are
    // judged by quarters of the work, not of the clock. Unset: by the clock.
    void set_work_clock(std::function<double(double)> work_at) { work_at_ = std::move(work_at); }
    void on_cache_create(const CacheCreateRecord& r);
    void on_cache_insert(const CacheInsertRecord& r);
    void on_cache_size(const CacheSizeRecord& r);
    void on_cache_misses(const CacheMissesRecord& r);
    void on_type_create(const TypeCreateRecord& r);
    void on_alloc_compact(const AllocCompactEvent& e);
    void on_free_compact(const FreeCompactEvent& e);

    // seconds(ticks) converts trace time; end_s is the end of the trace.
    PythonFindings finish(const std::function<double(uint64_t)>& seconds, double end_s);

    // Stack id of an allocation still alive (for classes reported without a stack).
    bool empty() const { return caches_.empty() && types_.empty(); }

    // Bytes still live at the end that were allocated by stack `stack_id` while computing a
    // missed entry of cache `cache_id`.
    uint64_t live_cache_bytes(uint64_t cache_id, uint64_t stack_id) const;

private:
    struct Cache {
        CacheCreateRecord info;
        std::vector<std::pair<uint64_t, int64_t>> samples;  // ticks, entries
        uint64_t insertions = 0;
        uint64_t first_insert = 0, last_insert = 0;
        std::unordered_map<uint64_t, uint64_t> inserting_stacks;  // stack id -> count
        std::vector<std::string> example_keys;  // distinct, in order seen, up to a bound
        std::vector<std::pair<uint64_t, std::vector<uint64_t>>> key_types;  // ticks, addresses
        double live_bytes = 0, live_count = 0, live_variance = 0;
        uint64_t live_samples = 0;
        std::vector<uint64_t> sample_free_ticks;  // sampled traces: when its samples died (few)
        std::vector<std::pair<uint64_t, double>> retained_deltas;  // ticks bucket, bytes
        unsigned retained_shift = 0;  // buckets are 2^(kRetainedBucketShift + this) ticks
    };
    struct ClassRecord {
        TypeCreateRecord info;
        uint64_t death_ticks = 0;  // 0 = alive at the end (or unknown)
    };
    struct Tag {
        uint64_t cache_id;
        uint64_t size;
        uint64_t stack_id;
    };

    Cache& cache(uint64_t id);
    void add_insertions(Cache& c, uint64_t count, uint64_t first_ticks, uint64_t last_ticks);
    void add_retained(Cache& c, uint64_t ticks, double bytes);
    // Keeps a cache's entry-count series bounded: a long run with a busy cache would otherwise
    // hold a point per insertion (the series only serves curves and quarter-by-quarter tests).
    void compact_samples(Cache& c);

    std::unordered_map<uint64_t, Cache> caches_;
    std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> open_misses_;  // tid -> (cache, seq)
    LiveBySequence<Tag> tagged_;  // allocation seq -> cache
    std::map<std::pair<uint64_t, uint64_t>, double> live_by_cache_stack_;  // (cache, stack) -> bytes
    uint64_t sample_period_ = 0;
    uint64_t exit_ticks_ = 0;
    uint64_t work_end_ticks_ = 0;
    std::vector<ClassRecord> types_;
    U64Map<size_t> type_by_allocation_;  // allocation seq -> types_ index
    std::unordered_map<uint64_t, std::vector<size_t>> types_by_address_;
    std::function<double(double)> work_at_ = [](double seconds) { return seconds; };
    // `steps` with their times read as the work done by then.

    // The steps of finish(); `seconds` converts trace time, `work_end_s` is where the
    // program's work ended.
    using Seconds = std::function<double(uint64_t)>;
    bool after_exit(uint64_t ticks) const { return exit_ticks_ && ticks > exit_ticks_; }
    void sort_classes_by_address();
    const ClassRecord* class_at(uint64_t address, uint64_t ticks) const;
    CacheFinding cache_finding(uint64_t id, Cache& c, const Seconds& seconds, double work_end_s) const;
    void judge_cache(const Cache& c, std::vector<Step>& steps, const Seconds& seconds, double work_end_s,
                     CacheFinding& f) const;
    std::vector<CacheKeyType> key_types_of(const Cache& c) const;
    TypeFinding type_finding(const std::string& name, const std::vector<const ClassRecord*>& classes,
                             const Seconds& seconds, double end_s, double work_end_s) const;
};

// Below these a cache or a class name is never a finding.
inline constexpr uint64_t kMinCacheGrowthEntries = 10;
// A cache that keeps growing gains entries in the second half of its work too, at least this
// many. One that filled with most of its keys at first and then met a few it had not seen yet
// (a gunicorn worker's openai cache: 10 keys in its first request, the response types of the
// next requests 4 more) is a finite set of keys being found out; on the work axis of a loaded
// machine those 4 can land in 3 different quarters.
inline constexpr uint64_t kMinLateCacheGrowthEntries = 5;
inline constexpr uint64_t kMinTypeCreations = 10;
inline constexpr uint64_t kMinDuplicateLiveClasses = 10;

}  // namespace growtrace
