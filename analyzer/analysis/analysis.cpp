#include "analyzer/analysis/analysis.h"

#include "analyzer/model/frame_folding.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "analyzer/read/record_decoder.h"
#include "analyzer/model/work_axis.h"

namespace growtrace {

namespace {

// Maps ticks to seconds since process start: least-squares line through every
// (ticks, monotonic_ns) pair the trace carries. Without two distinct points, ticks are taken
// to be nanoseconds. The fit is kept as running means and co-moments (Welford), so a trace of
// days, with a time mark every 100 ms, needs no memory per mark.
class TickClock {
public:
    void add(uint64_t ticks, uint64_t ns) {
        const double x = static_cast<double>(ticks), y = static_cast<double>(ns);
        n_ += 1;
        const double dx = x - mx_;
        mx_ += dx / n_;
        my_ += (y - my_) / n_;
        sxx_ += dx * (x - mx_);
        sxy_ += dx * (y - my_);
    }
    void set_start(uint64_t ticks, uint64_t ns) {
        start_ticks_ = static_cast<double>(ticks);
        start_ns_ = static_cast<double>(ns);
        add(ticks, ns);
    }
    void fit() {
        if (n_ >= 2 && sxx_ > 0 && sxy_ > 0) {
            ns_per_tick_ = sxy_ / sxx_;
            intercept_ = my_ - ns_per_tick_ * mx_;
            return;
        }
        ns_per_tick_ = 1;
        intercept_ = start_ns_ - start_ticks_;
    }
    double seconds(double ticks) const { return (intercept_ + ns_per_tick_ * ticks - start_ns_) / 1e9; }
    double ns_per_tick() const { return ns_per_tick_; }

private:
    double n_ = 0, mx_ = 0, my_ = 0, sxx_ = 0, sxy_ = 0;
    double start_ticks_ = 0, start_ns_ = 0;
    double ns_per_tick_ = 1, intercept_ = 0;
};

// RSS marks for the timeline, one per time mark of the trace: past 2 x kMaxRssMarks every other
// one is dropped, so a long trace keeps a bounded, evenly thinned series (the timeline has at
// most 512 windows).
constexpr size_t kMaxRssMarks = 4096;

// Feeds the CPython tracker on a thread of its own (the analysis's second core): on a full
// trace of a Python program it does as much work per event as the retention model, in hash
// tables of its own, so the two run side by side. Events are handed over in batches, in file
// order. Nothing before the first CPython record can matter to the tracker (no miss is open, no
// class is known), so a native program's trace starts no thread at all.
class PythonPipeline {
public:
    explicit PythonPipeline(PythonTracker& tracker) : tracker_(tracker) {}
    // After an error in the trace (the reader threw): the worker stops, nothing is rethrown.
    ~PythonPipeline() { stop(); }
    PythonPipeline(const PythonPipeline&) = delete;
    PythonPipeline& operator=(const PythonPipeline&) = delete;

    bool started() const { return started_; }

    void alloc(const AllocCompactEvent& e) {
        if (!started_) return;
        push(Event{Event::Alloc, 0, e.tid, e.ticks, e.size, e.stack_id, e.seq});
    }
    void free(const FreeCompactEvent& e) {
        if (!started_) return;
        push(Event{Event::Free, 0, e.tid, e.ticks, 0, 0, e.seq});
    }
    template <typename Record>
    void record(const Record& r) {
        start();
        current_.records.emplace_back(r);
        push(Event{Event::Record, static_cast<uint32_t>(current_.records.size() - 1), 0, 0, 0, 0, 0});
    }

    // Everything handed over has been applied when this returns (or the first exception the
    // tracker threw is rethrown here).
    void finish() {
        if (!started_) return;
        hand_over();
        stop();
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    }

private:
    struct Event {
        enum Kind : uint8_t { Alloc, Free, Record } kind;
        uint32_t record;
        uint64_t tid, ticks, size, stack, seq;
    };
    using AnyRecord =
        std::variant<CacheCreateRecord, CacheInsertRecord, CacheSizeRecord, TypeCreateRecord, CacheMissesRecord>;
    struct Batch {
        std::vector<Event> events;
        std::vector<AnyRecord> records;
    };
    static constexpr size_t kBatchEvents = 1 << 15;
    static constexpr size_t kMaxQueued = 4;  // batches in flight: memory stays bounded

    void stop() {
        if (!started_) return;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        ready_.notify_all();
        if (worker_.joinable()) worker_.join();
        started_ = false;
    }
    void start() {
        if (started_) return;
        started_ = true;
        worker_ = std::thread([this] { run(); });
    }
    void push(const Event& e) {
        current_.events.push_back(e);
        if (current_.events.size() >= kBatchEvents) hand_over();
    }
    void hand_over() {
        if (current_.events.empty()) return;
        std::unique_lock<std::mutex> lock(mutex_);
        space_.wait(lock, [&] { return queue_.size() < kMaxQueued; });
        queue_.push_back(std::move(current_));
        current_ = Batch{};
        current_.events.reserve(kBatchEvents);
        lock.unlock();
        ready_.notify_one();
    }
    void run() {
        for (;;) {
            Batch batch;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                ready_.wait(lock, [&] { return !queue_.empty() || done_; });
                if (queue_.empty()) return;
                batch = std::move(queue_.front());
                queue_.pop_front();
            }
            space_.notify_one();
            if (error_) continue;  // drain; the first error is rethrown by finish()
            try {
                apply(batch);
            } catch (...) {
                error_ = std::current_exception();
            }
        }
    }
    void apply(const Batch& batch) {
        for (const Event& e : batch.events) {
            switch (e.kind) {
                case Event::Alloc:
                    tracker_.on_alloc_compact(AllocCompactEvent{e.tid, e.ticks, e.size, e.stack, e.seq});
                    break;
                case Event::Free:
                    tracker_.on_free_compact(FreeCompactEvent{e.tid, e.ticks, e.seq});
                    break;
                case Event::Record:
                    std::visit(
                        [&](const auto& r) {
                            using R = std::decay_t<decltype(r)>;
                            if constexpr (std::is_same_v<R, CacheCreateRecord>) tracker_.on_cache_create(r);
                            else if constexpr (std::is_same_v<R, CacheInsertRecord>) tracker_.on_cache_insert(r);
                            else if constexpr (std::is_same_v<R, CacheSizeRecord>) tracker_.on_cache_size(r);
                            else if constexpr (std::is_same_v<R, CacheMissesRecord>) tracker_.on_cache_misses(r);
                            else tracker_.on_type_create(r);
                        },
                        batch.records[e.record]);
                    break;
            }
        }
    }

    PythonTracker& tracker_;
    bool started_ = false;
    Batch current_;
    std::mutex mutex_;
    std::condition_variable ready_, space_;
    std::deque<Batch> queue_;
    bool done_ = false;
    std::exception_ptr error_;
    std::thread worker_;
};

struct StackNode {
    uint64_t parent = 0;
    uint64_t ip = 0;
    uint32_t generation = 0;  // module-set generation when the node was defined
};

// Gathers everything but the events' retention (which goes straight into the model).
class Collector : public RecordVisitor {
public:
    explicit Collector(RetentionModel& model, Symbolizer& symbolizer) : model_(model), symbolizer_(symbolizer) {}

    void on_process(const ProcessRecord& r) override {
        if (seen_process_) return;  // only the first describes this trace
        seen_process_ = true;
        pid = r.pid;
        for (const auto& a : r.argv) command += (command.empty() ? "" : " ") + a;
        if (command.empty()) command = r.exe;
        exe = r.exe;
        argv = r.argv;
        start_realtime_ns = r.start_realtime_ns;
        clock.set_start(r.start_ticks, r.start_monotonic_ns);
        start_ticks = r.start_ticks;
        model_.set_origin(r.start_ticks);
    }
    bool seen_process() const { return seen_process_; }
    void on_sampling(uint64_t mean_bytes) override {
        if (seen_sampling_) return;  // only the first describes this trace
        seen_sampling_ = true;
        sample_period = mean_bytes;
        model_.set_sample_period(mean_bytes);
        python.set_sample_period(mean_bytes);
    }
    void on_module(const ModuleRecord& r) override {
        symbolizer_.add_module(r, generation_);
        if (module_seen_.insert({r.path, r.base}).second) modules.push_back(r);
    }
    void on_modules_reset(const ModulesResetRecord&) override { ++generation_; }
    void on_stack_node(const StackNodeRecord& r) override { nodes[r.id] = StackNode{r.parent, r.ip, generation_}; }
    void on_py_frame(const PyFrameRecord& r) override { py_frames[r.id] = r; }
    void on_alloc(const AllocEvent& e) override { model_.on_alloc(e); }
    void on_free(const FreeEvent& e) override {
        if (!at_shutdown(e.ticks)) model_.on_free(e);
    }
    void on_alloc_compact(const AllocCompactEvent& e) override {
        ++ledger.file_allocations;
        model_.on_alloc_compact(e);
        python_feed_.alloc(e);
    }
    void on_free_compact(const FreeCompactEvent& e) override {
        ++ledger.file_frees;
        if (at_shutdown(e.ticks)) return;
        auto collecting = collecting_.find(e.tid);
        const uint64_t death = collecting != collecting_.end()
                                   ? model_.on_garbage_free_compact(e, collecting->second)
                                   : model_.on_free_compact(e);
        // The CPython tracker sees the death where the model counted it: a class freed by a
        // full collection was garbage since the previous one, not alive until this one.
        python_feed_.free(FreeCompactEvent{e.tid, death ? death : e.ticks, e.seq});
    }
    // Counted by the writer, born and dead within an interval: their thread is not known, and
    // the CPython tracker, which attributes samples to a thread's open miss, counts only what
    // stays live.
    void on_short_lived_samples(const ShortLivedSamplesRecord& r) override {
        for (const ShortLivedGroup& g : r.groups) {  // each stands for an allocation and its free
            ledger.file_allocations += g.count;
            ledger.file_frees += g.count;
        }
        model_.on_short_lived(r);
    }
    void on_ledger(const LedgerRecord& r) override {
        ledger.present = true;
        ledger.tracer = r;
    }
    // Full collections of the program's garbage collector, per collecting thread (its run holds
    // the collection's frees between its start and its stop).
    void on_collection(const CollectionRecord& r) override {
        // The agent's own collection at the shutdown mark belongs to shutdown, not to the work.
        if (r.phase == CollectionRecord::Start && (r.flags & CollectionRecord::AtShutdown) &&
            (!shutdown_collection_ticks || r.ticks < shutdown_collection_ticks))
            shutdown_collection_ticks = r.ticks;
        if (r.phase == CollectionRecord::Start) {
            collecting_[r.tid] = last_full_collection_end_;
            ++full_collections;
            return;
        }
        if (collecting_.erase(r.tid)) last_full_collection_end_ = std::max(last_full_collection_end_, r.ticks);
    }
    // What a program frees once it has begun to exit (an interpreter tearing down its modules
    // and caches) is not its steady state: retention is measured when exiting began.
    void on_exiting(uint64_t ticks) override {
        if (!exit_ticks || ticks < exit_ticks) exit_ticks = ticks;
    }
    bool at_shutdown(uint64_t ticks) const { return exit_ticks && ticks > exit_ticks; }
    void on_cache_create(const CacheCreateRecord& r) override { python_feed_.record(r); }
    void on_cache_insert(const CacheInsertRecord& r) override { python_feed_.record(r); }
    void on_cache_size(const CacheSizeRecord& r) override { python_feed_.record(r); }
    void on_cache_misses(const CacheMissesRecord& r) override { python_feed_.record(r); }
    // A class reported by the agent's gc scan comes without a stack: the allocation holding
    // it has the one that created it (looked up here, where the retention model is).
    void on_type_create(const TypeCreateRecord& r) override {
        if (r.stack_id || !r.allocation_seq) return python_feed_.record(r);
        TypeCreateRecord with_stack = r;
        with_stack.stack_id = model_.live_stack_id(r.allocation_seq);
        python_feed_.record(with_stack);
    }
    // A container's blocks are named by allocation: their stacks are looked up here, where the
    // retention model is, while they are alive.
    void on_container(const ContainerRecord& r) override {
        std::vector<uint64_t> entry_stacks;
        for (uint64_t seq : r.entry_allocations) entry_stacks.push_back(model_.live_stack_id(seq));
        containers.on_container(r, r.table_allocation ? model_.live_stack_id(r.table_allocation) : 0, entry_stacks);
    }
    // The tracker's state is complete (call once the trace is read).
    void finish_python() { python_feed_.finish(); }
    void on_time_mark(const TimeMarkRecord& r) override {
        clock.add(r.ticks, r.monotonic_ns);
        if (rss_stride_ > 1 && marks_seen_++ % rss_stride_ != 0) {
        } else {
            rss.emplace_back(r.ticks, r.rss_bytes);
            if (rss.size() > 2 * kMaxRssMarks) {
                size_t out = 0;
                for (size_t i = 0; i < rss.size(); i += 2) rss[out++] = rss[i];
                rss.resize(out);
                rss_stride_ *= 2;
            }
        }
        last_ticks = std::max(last_ticks, r.ticks);
    }
    void on_end(const EndRecord& r) override {
        clock.add(r.ticks, r.monotonic_ns);
        last_ticks = std::max(last_ticks, r.ticks);
    }
    void on_fork(const ForkRecord& r) override { children.push_back(ChildTrace{"fork", r.child_pid, r.path}); }
    void on_exec(const ExecRecord& r) override {
        children.push_back(ChildTrace{"exec", 0, r.path});
        execed = true;
    }
    void on_tracer_error(const TracerErrorRecord& r) override { tracer_errors.push_back(r); }

    uint64_t pid = 0;
    std::string exe;
    std::vector<std::string> argv;
    uint64_t start_realtime_ns = 0;
    std::vector<ModuleRecord> modules;
    bool execed = false;  // an Exec record: the image was replaced, its trace ends there
    std::string command;
    uint64_t sample_period = 0;
    uint64_t start_ticks = 0;
    uint64_t exit_ticks = 0;  // 0 = no Exiting record
    uint64_t full_collections = 0;  // Collection start records (the agent reports full ones only)
    uint64_t shutdown_collection_ticks = 0;  // start of the agent's collection at the mark, 0 none
    uint64_t last_ticks = 0;
    TickClock clock;
    std::unordered_map<uint64_t, StackNode> nodes;
    std::unordered_map<uint64_t, PyFrameRecord> py_frames;
    std::vector<std::pair<uint64_t, uint64_t>> rss;  // (ticks, bytes)
    std::vector<ChildTrace> children;
    std::vector<TracerErrorRecord> tracer_errors;
    PythonTracker python;
    ContainerTracker containers;
    LedgerCheck ledger;  // the file's counts, and the tracer's Ledger record

private:
    PythonPipeline python_feed_{python};
    // Threads inside a full collection -> end of the full collection before it (0: none).
    std::unordered_map<uint64_t, uint64_t> collecting_;
    uint64_t last_full_collection_end_ = 0;
    RetentionModel& model_;
    Symbolizer& symbolizer_;
    bool seen_process_ = false;
    bool seen_sampling_ = false;
    uint64_t rss_stride_ = 1;  // one mark in this many is kept
    uint64_t marks_seen_ = 0;
    uint32_t generation_ = 0;
    std::set<std::pair<std::string, uint64_t>> module_seen_;  // (path, base)
};

// A corrupt parent chain could loop; no real stack is deeper than this.
constexpr size_t kMaxStackDepth = 4096;

std::vector<Frame> resolve_stack(uint64_t leaf, const Collector& c, Symbolizer& symbolizer) {
    std::vector<Frame> frames;
    uint64_t id = leaf;
    while (id != 0 && frames.size() < kMaxStackDepth) {
        auto it = c.nodes.find(id);
        if (it == c.nodes.end()) {
            Frame f;
            f.function = fmt::format("<stack node {} missing from trace>", id);
            frames.push_back(f);
            break;
        }
        const StackNode& node = it->second;
        if (node.ip & format::kPythonFrameTag) {
            Frame f;
            f.ip = node.ip;
            f.module_path = "python";
            auto py = c.py_frames.find(node.ip & ~format::kPythonFrameTag);
            if (py != c.py_frames.end()) {
                f.function = py->second.function;
                f.file = py->second.file;
                f.line = static_cast<uint32_t>(py->second.line);
            } else {
                f.function = "<python frame missing from trace>";
            }
            frames.push_back(f);
        } else {
            frames.push_back(symbolizer.symbolize(node.ip, /*return_address=*/!frames.empty(), node.generation));
        }
        id = node.parent;
    }
    return frames;
}

std::string frames_key(const std::vector<Frame>& frames) {
    std::string key;
    for (const Frame& f : frames) key += fmt::format("{}\x1f{}\x1f{}\x1f{}\x1e", f.function, f.file, f.line, f.module_path);
    return key;
}

double peak_of(const std::vector<WindowBin>& bins) {
    double level = 0, peak = 0;
    for (const WindowBin& b : bins) {
        level += b.births_bytes - b.deaths_bytes;
        peak = std::max(peak, level);
    }
    return peak;
}

// An estimate as a whole number for the reports (exact figures are whole already).
uint64_t rounded(double v) { return v > 0 ? static_cast<uint64_t>(std::llround(v)) : 0; }

// The group's series on the work axis: its time windows' figures summed into work windows.
GrowthSeries dense_series(const StackRetention& s, const WorkAxis& axis, double window_s, uint64_t sample_period) {
    GrowthSeries g;
    const size_t windows = axis.size();
    g.window_s = window_s;
    g.window_start_s = axis.start_s;
    g.window_end_s = axis.end_s;
    g.window_allocations = axis.allocations;
    g.window_first_time = axis.first_time;
    g.window_last_time = axis.last_time;
    g.births_bytes.assign(windows, 0);
    g.deaths_bytes.assign(windows, 0);
    g.survivor_bytes.assign(windows, 0);
    g.death_samples.assign(windows, 0);
    for (const WindowBin& b : s.bins) {
        if (b.window >= axis.parts.size()) continue;
        for (const WorkAxis::Part& part : axis.parts[b.window]) {
            g.births_bytes[part.window] += static_cast<double>(b.births_bytes) * part.fraction;
            g.deaths_bytes[part.window] += static_cast<double>(b.deaths_bytes) * part.fraction;
        }
        // Whole records: the part that holds the window's end, where the deaths are counted.
        g.death_samples[axis.parts[b.window].back().window] += b.death_samples;
    }
    for (const SurvivorBin& b : s.survivors)
        if (b.window < axis.parts.size())
            for (const WorkAxis::Part& part : axis.parts[b.window])
                g.survivor_bytes[part.window] += static_cast<double>(b.bytes) * part.fraction;
    g.work_begin = axis.work_begin;
    g.work_end = axis.work_end;
    g.sample_period = sample_period;
    g.samples = s.samples;
    g.live_samples = s.live_samples;
    return g;
}

// The work in each time window: the whole program's allocations. Frees without allocations (a
// clean-up loop, a collection) are no work, so a teardown stays at the very end of the work
// however long it takes. In a sampled trace the allocation counts are estimates ruled by the
// smallest samples (a 16-byte sample stands for tens of thousands of allocations), so the
// bytes allocated, whose estimate is steady, measure the work there.
std::vector<double> work_per_window(const RetentionResult& r, bool sampled) {
    std::vector<double> work(r.num_windows);
    for (uint32_t w = 0; w < r.num_windows && w < r.heap.size(); ++w)
        work[w] = sampled ? r.heap[w].births_bytes : r.heap[w].births;
    return work;
}

WorkAxis work_axis_of(const RetentionResult& r, double window_s, size_t work_begin, size_t work_end, bool sampled) {
    std::vector<double> allocations(r.num_windows);
    for (uint32_t w = 0; w < r.num_windows && w < r.heap.size(); ++w) allocations[w] = r.heap[w].births;
    return build_work_axis(work_per_window(r, sampled), allocations, window_s, work_begin, work_end);
}

WorkClock work_clock_of(const RetentionResult& r, double window_s, bool sampled) {
    return build_work_clock(work_per_window(r, sampled), window_s);
}

void merge_into(StackRetention& to, const StackRetention& from) {
    for (const WindowBin& b : from.bins) add_to_bins(to.bins, b);
    std::vector<SurvivorBin> merged;
    std::merge(to.survivors.begin(), to.survivors.end(), from.survivors.begin(), from.survivors.end(),
               std::back_inserter(merged), [](const SurvivorBin& a, const SurvivorBin& b) { return a.window < b.window; });
    to.survivors.clear();
    for (const SurvivorBin& b : merged) {
        if (!to.survivors.empty() && to.survivors.back().window == b.window) {
            to.survivors.back().bytes += b.bytes;
            to.survivors.back().count += b.count;
        } else {
            to.survivors.push_back(b);
        }
    }
    to.allocations += from.allocations;
    to.allocated_bytes += from.allocated_bytes;
    to.live_bytes += from.live_bytes;
    to.live_count += from.live_count;
    to.samples += from.samples;
    to.live_samples += from.live_samples;
    to.live_bytes_variance += from.live_bytes_variance;
}

// Bytes held at the end of each window, from the sparse births/deaths bins.
std::vector<uint64_t> retained_series(const std::vector<WindowBin>& bins, uint32_t windows) {
    std::vector<uint64_t> out(windows, 0);
    double level = 0;
    size_t i = 0;
    for (uint32_t w = 0; w < windows; ++w) {
        for (; i < bins.size() && bins[i].window <= w; ++i) level += bins[i].births_bytes - bins[i].deaths_bytes;
        out[w] = rounded(level);
    }
    return out;
}

std::vector<TimelinePoint> build_timeline(const RetentionResult& r, const Collector& c, double window_s) {
    std::vector<TimelinePoint> out;
    double level = 0;
    size_t rss_i = 0;
    uint64_t rss = 0;
    std::vector<std::pair<uint64_t, uint64_t>> marks = c.rss;
    std::sort(marks.begin(), marks.end());
    for (uint32_t w = 0; w < r.num_windows; ++w) {
        level += r.heap[w].births_bytes - r.heap[w].deaths_bytes;
        const uint64_t window_end = r.origin_ticks + (uint64_t{w} + 1) * r.window_ticks();
        while (rss_i < marks.size() && marks[rss_i].first < window_end) rss = marks[rss_i++].second;
        out.push_back(TimelinePoint{(w + 1) * window_s, rounded(level), rss});
    }
    return out;
}

// What the traced heap gained while a group grew: its highest level from the group's first
// window to the end of its active run (its teardown, if any), less its level just before.
double heap_growth_during(const std::vector<TimelinePoint>& timeline, const GrowthVerdict& v) {
    const double end_s = v.teardown_at_s > 0 ? v.teardown_at_s : std::numeric_limits<double>::infinity();
    double before = 0, highest = 0;
    for (const TimelinePoint& p : timeline) {
        const double heap = static_cast<double>(p.heap_bytes);
        if (p.t_s <= v.started_at_s) before = highest = heap;
        else if (p.t_s <= end_s) highest = std::max(highest, heap);
    }
    return highest - before;
}

// A stack's figures before symbolization, for StackProfile.
struct RawStackFigures {
    uint64_t stack_id = 0;
    double inuse_bytes = 0, inuse_objects = 0, alloc_bytes = 0, alloc_objects = 0;
};

// The classifier's word on a group of stacks, for each of its stacks.
struct Judged {
    const char* verdict;
    double slope_bytes_per_s;  // the group's
    double live_bytes;         // the group's
    size_t stacks;
};

// Every stack symbolized, with the verdicts of the groups that were judged and the cache that
// explains a finding's memory. Frames are shared through one table, found by address (a
// Python frame's address is its code location's id).
void build_stack_profiles(const std::vector<RawStackFigures>& raw, const Collector& c, Symbolizer& symbolizer,
                          const std::unordered_map<uint64_t, Judged>& judged, AnalysisResult& out) {
    std::unordered_map<uint64_t, const std::string*> cache_of_stack;
    for (const GroupReport& g : out.findings)
        if (!g.explained_by_cache.empty())
            for (uint64_t id : g.stack_ids) cache_of_stack[id] = &g.explained_by_cache;
    std::unordered_map<uint64_t, std::vector<uint32_t>> frames_at;  // ip -> indices (same ip, other symbols: rare)
    auto frame_index = [&](const Frame& f) {
        std::vector<uint32_t>& candidates = frames_at[f.ip];
        for (uint32_t i : candidates) {
            const Frame& known = out.profile_frames[i];
            if (known.function == f.function && known.file == f.file && known.line == f.line &&
                known.module_path == f.module_path)
                return i;
        }
        candidates.push_back(static_cast<uint32_t>(out.profile_frames.size()));
        out.profile_frames.push_back(f);
        return candidates.back();
    };
    out.stack_profiles.reserve(raw.size());
    for (const RawStackFigures& r : raw) {
        StackProfile p;
        for (const Frame& f : fold_interpreter_frames(resolve_stack(r.stack_id, c, symbolizer)))
            p.frames.push_back(frame_index(f));
        if (auto j = judged.find(r.stack_id); j != judged.end()) {
            p.verdict = j->second.verdict;
            const double share = j->second.live_bytes > 0 ? r.inuse_bytes / j->second.live_bytes
                                                          : 1.0 / static_cast<double>(j->second.stacks);
            p.growth_bytes_per_s = j->second.slope_bytes_per_s * share;
        }
        p.inuse_bytes = r.inuse_bytes;
        p.inuse_objects = r.inuse_objects;
        p.alloc_bytes = r.alloc_bytes;
        p.alloc_objects = r.alloc_objects;
        if (auto cache = cache_of_stack.find(r.stack_id); cache != cache_of_stack.end()) p.cache = *cache->second;
        out.stack_profiles.push_back(std::move(p));
    }
}

}  // namespace

namespace {
// Caches and classes from the CPython agent's records; their stacks are symbolized here.
// A growing stack whose live memory was nearly all allocated while computing missed entries
// of one growing cache is that cache's memory: the report names the cache, not each of them.
void explain_by_caches(AnalysisResult& out, const PythonTracker& python) {
    constexpr double kExplainedShare = 0.9;
    for (GroupReport& g : out.findings) {
        for (const CacheReport& cache : out.cache_findings) {
            uint64_t bytes = 0;
            for (uint64_t id : g.stack_ids) bytes += python.live_cache_bytes(cache.cache.cache_id, id);
            if (g.retained_bytes && static_cast<double>(bytes) >= kExplainedShare * static_cast<double>(g.retained_bytes)) {
                g.explained_by_cache = cache.cache.name;
                break;
            }
        }
    }
}

void add_python_findings(AnalysisResult& out, Collector& c, Symbolizer& symbolizer, const WorkClock& work) {
    if (c.python.empty()) return;
    auto seconds = [&](uint64_t ticks) { return c.clock.seconds(static_cast<double>(ticks)); };
    c.python.set_exit_ticks(c.exit_ticks, c.shutdown_collection_ticks);
    c.python.set_work_clock([work](double s) { return work.at(s); });
    PythonFindings found = c.python.finish(seconds, out.duration_s);
    for (CacheFinding& f : found.caches) {
        CacheReport report{std::move(f), {}};
        if (report.cache.inserted_from_stack)
            report.inserted_from = fold_interpreter_frames(resolve_stack(report.cache.inserted_from_stack, c, symbolizer));
        (report.cache.unbounded ? out.cache_findings : out.caches).push_back(std::move(report));
    }
    for (TypeFinding& f : found.types) {
        TypeReport report{std::move(f), {}};
        if (report.type.creation_stack)
            report.created_from = fold_interpreter_frames(resolve_stack(report.type.creation_stack, c, symbolizer));
        (report.type.unbounded ? out.type_findings : out.types).push_back(std::move(report));
    }
    if (out.caches.size() > kMaxReportedGroups) out.caches.resize(kMaxReportedGroups);
    if (out.types.size() > kMaxReportedGroups) out.types.resize(kMaxReportedGroups);
    explain_by_caches(out, c.python);
}

// Containers the agent's walks measured: the memory a container holds is what the stacks that
// allocated its newest entries keep alive (each group counted once).
void add_container_findings(AnalysisResult& out, Collector& c, Symbolizer& symbolizer, const WorkClock& work) {
    if (c.containers.empty()) return;
    auto seconds = [&](uint64_t ticks) { return c.clock.seconds(static_cast<double>(ticks)); };
    for (ContainerFinding& f : c.containers.finish(seconds, c.exit_ticks, [work](double s) { return work.at(s); })) {
        ContainerReport report{std::move(f), {}};
        ContainerFinding& cf = report.container;
        if (!cf.insert_stacks.empty())
            report.inserted_from = fold_interpreter_frames(resolve_stack(cf.insert_stacks.front(), c, symbolizer));
        if (cf.unbounded && filled_by_imports(report.inserted_from)) {
            cf.unbounded = false;
            cf.confidence = 0;
            cf.reason = "filled by imports (its inserting stack runs through the import system): start-up, not work";
        }
        auto holds = [&](const GroupReport& g) {
            return std::any_of(g.stack_ids.begin(), g.stack_ids.end(), [&](uint64_t id) {
                return std::find(cf.entry_stacks.begin(), cf.entry_stacks.end(), id) != cf.entry_stacks.end();
            });
        };
        for (const GroupReport& g : out.findings) {
            if (!holds(g)) continue;
            cf.retained_bytes += g.retained_bytes;
            cf.growth_bytes_per_s += g.verdict.slope_bytes_per_s;
        }
        for (const GroupReport& g : out.groups)
            if (holds(g)) cf.retained_bytes += g.retained_bytes;
        (cf.unbounded ? out.container_findings : out.containers).push_back(std::move(report));
    }
    if (out.containers.size() > kMaxReportedGroups) out.containers.resize(kMaxReportedGroups);
}
}  // namespace

size_t finding_count(const AnalysisResult& r) {
    return r.findings.size() + r.cache_findings.size() + r.type_findings.size() + r.container_findings.size();
}

namespace {

// What the trace says of its process, as it is.
void copy_process_facts(const ReadSummary& summary, Collector& c, AnalysisResult& out) {
    out.trace_format_version = summary.version;
    out.ended_cleanly = summary.ended_cleanly;
    out.ledger = c.ledger;
    out.pid = c.pid;
    out.command = c.command;
    out.sample_period = c.sample_period;
    out.children = c.children;
    out.exe = c.exe;
    out.argv = c.argv;
    out.start_realtime_ns = c.start_realtime_ns;
    out.modules = std::move(c.modules);
}

// The window width in seconds, windows merged first where they are narrower than
// kMinWindowSeconds.
double coarsen_windows(RetentionResult& r, const Collector& c) {
    double window_s = static_cast<double>(r.window_ticks()) * c.clock.ns_per_tick() / 1e9;
    if (window_s > 0 && window_s < kMinWindowSeconds) {
        const unsigned extra = static_cast<unsigned>(std::ceil(std::log2(kMinWindowSeconds / window_s)));
        r.coarsen(extra);
        window_s *= std::ldexp(1.0, static_cast<int>(extra));
    }
    return window_s;
}

// The span of windows in which the program did any heap work at all, up to the agent's
// collection at the shutdown mark (a large heap takes a while to collect: that is no plateau).
std::pair<size_t, size_t> work_span(const RetentionResult& r, const Collector& c) {
    size_t work_begin = 0, work_end = 0;
    bool any = false;
    uint32_t work_limit = r.num_windows;
    if (c.shutdown_collection_ticks > r.origin_ticks)
        work_limit = static_cast<uint32_t>(
            std::min<uint64_t>(r.num_windows, (c.shutdown_collection_ticks - r.origin_ticks) / r.window_ticks() + 1));
    for (uint32_t w = 0; w < work_limit; ++w)
        if (r.heap[w].births || r.heap[w].deaths) {
            if (!any) work_begin = w;
            work_end = w;
            any = true;
        }
    return {work_begin, work_end};
}

// Stacks with the same frames, merged: their retention and their report under way.
struct StackGroups {
    std::map<std::string, GroupReport> by_frames;
    std::map<std::string, StackRetention> merged;
};

// Only stacks that ever held a significant amount are symbolized and classified: the rest
// cannot become findings and symbolizing them all would dominate the run time. With
// `raw_stacks`, every stack's figures are kept for the profile exports.
StackGroups group_significant_stacks(RetentionResult& r, Collector& c, Symbolizer& symbolizer,
                                     std::vector<RawStackFigures>* raw_stacks) {
    StackGroups groups;
    for (StackRetention& s : r.stacks) {
        if (raw_stacks)
            raw_stacks->push_back({s.stack_id, s.live_bytes, s.live_count, s.allocated_bytes, s.allocations});
        if (peak_of(s.bins) < kMinSignificantBytes) continue;
        const uint64_t id = s.stack_id;
        std::vector<Frame> frames = resolve_stack(id, c, symbolizer);
        const std::string key = frames_key(frames);
        auto [it, inserted] = groups.merged.try_emplace(key);
        if (inserted) {
            it->second = std::move(s);
            groups.by_frames[key].frames = std::move(frames);
        } else {
            merge_into(it->second, s);
        }
        groups.by_frames[key].stack_ids.push_back(id);
    }
    return groups;
}

// Each group classified and sorted into findings (unbounded and significant) and the other
// groups, largest retained first. With `judged`, every stack's group verdict is kept too.
void classify_groups(StackGroups& groups, const RetentionResult& r, const WorkAxis& axis, double window_s,
                     uint64_t sample_period, std::unordered_map<uint64_t, Judged>* judged, AnalysisResult& out) {
    for (auto& [key, s] : groups.merged) {
        GroupReport g = std::move(groups.by_frames[key]);
        g.frames = fold_interpreter_frames(g.frames);
        g.verdict = classify_growth(dense_series(s, axis, window_s, sample_period));
        g.retained_bytes = rounded(s.live_bytes);
        g.live_allocations = rounded(s.live_count);
        g.allocations = rounded(s.allocations);
        g.allocated_bytes = rounded(s.allocated_bytes);
        g.samples = s.samples;
        g.live_samples = s.live_samples;
        g.retained_bytes_stderr = std::sqrt(std::max(0.0, s.live_bytes_variance));
        g.retained_series = retained_series(s.bins, r.num_windows);
        if (judged)
            for (uint64_t id : g.stack_ids)
                (*judged)[id] = Judged{growth_class_name(g.verdict.cls), g.verdict.slope_bytes_per_s, s.live_bytes,
                                       g.stack_ids.size()};
        if (g.verdict.cls == GrowthClass::Unbounded)
            g.significance = judge_significance(g.verdict, heap_growth_during(out.timeline, g.verdict));
        if (g.verdict.cls == GrowthClass::Unbounded && g.significance.significant) out.findings.push_back(std::move(g));
        else out.groups.push_back(std::move(g));
    }
    auto by_retained = [](const GroupReport& a, const GroupReport& b) { return a.retained_bytes > b.retained_bytes; };
    std::sort(out.findings.begin(), out.findings.end(), by_retained);
    std::sort(out.groups.begin(), out.groups.end(), by_retained);
    if (out.groups.size() > kMaxReportedGroups) out.groups.resize(kMaxReportedGroups);
}

// What the reader should know about the trace itself: empty, cut short, the tracer's own
// errors, a ledger that does not balance, the symbolizer's misses.
void add_trace_warnings(const ReadSummary& summary, const RetentionResult& r, Collector& c, Symbolizer& symbolizer,
                        AnalysisResult& out) {
    if (summary.records == 0)
        out.warnings.push_back(fmt::format("trace holds no records, only its {}-byte file header: the process ended, "
                                           "exec'd or was killed (or the disk filled) before the tracer's first flush; "
                                           "there is nothing to analyse",
                                           summary.file_size));
    else if (!out.ended_cleanly)
        out.warnings.push_back(c.execed ? "trace ends where the process exec'd another program (traced to a file of its own)"
                                        : "trace has no end record (the process was killed or is still running); "
                                          "analysed up to its last flush");
    if (summary.records && !c.seen_process())
        out.warnings.push_back("trace has no Process record: the process id and command are unknown");
    for (const auto& e : c.tracer_errors)
        out.warnings.push_back(fmt::format("tracer error at {:.3f} s: {}", c.clock.seconds(static_cast<double>(e.ticks)), e.message));
    if (std::string problem = out.ledger.problem(); !problem.empty()) out.warnings.push_back(std::move(problem));
    if (r.totals.untraced_reuses)
        out.warnings.push_back(fmt::format("{} allocations had their address reused without a traced free", r.totals.untraced_reuses));
    for (auto& w : symbolizer.take_warnings()) out.warnings.push_back(std::move(w));
}

}  // namespace

AnalysisResult analyze_trace(const std::string& path, const AnalyzeTraceOptions& options) {
    RetentionModel model;
    Symbolizer symbolizer;
    Collector c(model, symbolizer);
    const ReadSummary summary = read_trace(path, c);
    c.finish_python();

    AnalysisResult out;
    copy_process_facts(summary, c, out);
    const uint64_t last_ticks = std::max(c.last_ticks, model.max_ticks());
    RetentionResult r = model.finish();
    c.clock.fit();
    const double window_s = coarsen_windows(r, c);
    out.window_s = window_s;
    out.duration_s = std::max(0.0, c.clock.seconds(static_cast<double>(last_ticks)));
    out.totals = r.totals;

    const auto [work_begin, work_end] = work_span(r, c);
    const WorkAxis axis = work_axis_of(r, window_s, work_begin, work_end, c.sample_period != 0);
    std::vector<RawStackFigures> raw_stacks;
    std::unordered_map<uint64_t, Judged> judged;  // by stack id
    StackGroups groups = group_significant_stacks(r, c, symbolizer, options.stack_profiles ? &raw_stacks : nullptr);
    out.timeline = build_timeline(r, c, window_s);
    classify_groups(groups, r, axis, window_s, c.sample_period, options.stack_profiles ? &judged : nullptr, out);

    const WorkClock work = work_clock_of(r, window_s, c.sample_period != 0);
    add_python_findings(out, c, symbolizer, work);
    add_container_findings(out, c, symbolizer, work);
    out.root_causes = find_root_causes(out);
    if (options.stack_profiles) build_stack_profiles(raw_stacks, c, symbolizer, judged, out);
    add_trace_warnings(summary, r, c, symbolizer, out);
    return out;
}

}  // namespace growtrace
