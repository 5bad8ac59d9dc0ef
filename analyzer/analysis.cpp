#include "analyzer/analysis.h"

#include "analyzer/frame_folding.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "analyzer/record_decoder.h"

namespace growtrace {

namespace {

// Maps ticks to seconds since process start: least-squares line through every
// (ticks, monotonic_ns) pair the trace carries. Without two distinct points, ticks are taken
// to be nanoseconds.
class TickClock {
public:
    void add(uint64_t ticks, uint64_t ns) { points_.emplace_back(static_cast<double>(ticks), static_cast<double>(ns)); }
    void set_start(uint64_t ticks, uint64_t ns) {
        start_ticks_ = static_cast<double>(ticks);
        start_ns_ = static_cast<double>(ns);
        add(ticks, ns);
    }
    void fit() {
        double n = 0, sx = 0, sy = 0;
        for (auto [x, y] : points_) n += 1, sx += x, sy += y;
        if (n >= 2) {
            const double mx = sx / n, my = sy / n;
            double sxx = 0, sxy = 0;
            for (auto [x, y] : points_) sxx += (x - mx) * (x - mx), sxy += (x - mx) * (y - my);
            if (sxx > 0 && sxy > 0) {
                ns_per_tick_ = sxy / sxx;
                intercept_ = my - ns_per_tick_ * mx;
                return;
            }
        }
        ns_per_tick_ = 1;
        intercept_ = start_ns_ - start_ticks_;
    }
    double seconds(double ticks) const { return (intercept_ + ns_per_tick_ * ticks - start_ns_) / 1e9; }
    double ns_per_tick() const { return ns_per_tick_; }

private:
    std::vector<std::pair<double, double>> points_;
    double start_ticks_ = 0, start_ns_ = 0;
    double ns_per_tick_ = 1, intercept_ = 0;
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
        clock.set_start(r.start_ticks, r.start_monotonic_ns);
        start_ticks = r.start_ticks;
        model_.set_origin(r.start_ticks);
    }
    bool seen_process() const { return seen_process_; }
    void on_module(const ModuleRecord& r) override { symbolizer_.add_module(r, generation_); }
    void on_modules_reset(const ModulesResetRecord&) override { ++generation_; }
    void on_stack_node(const StackNodeRecord& r) override { nodes[r.id] = StackNode{r.parent, r.ip, generation_}; }
    void on_py_frame(const PyFrameRecord& r) override { py_frames[r.id] = r; }
    void on_alloc(const AllocEvent& e) override { model_.on_alloc(e); }
    void on_free(const FreeEvent& e) override {
        if (!at_shutdown(e.ticks)) model_.on_free(e);
    }
    void on_alloc_compact(const AllocCompactEvent& e) override {
        model_.on_alloc_compact(e);
        python.on_alloc_compact(e);
    }
    void on_free_compact(const FreeCompactEvent& e) override {
        if (at_shutdown(e.ticks)) return;
        model_.on_free_compact(e);
        python.on_free_compact(e);
    }
    // What a program frees once it has begun to exit (an interpreter tearing down its modules
    // and caches) is not its steady state: retention is measured when exiting began.
    void on_exiting(uint64_t ticks) override {
        if (!exit_ticks || ticks < exit_ticks) exit_ticks = ticks;
    }
    bool at_shutdown(uint64_t ticks) const { return exit_ticks && ticks > exit_ticks; }
    void on_cache_create(const CacheCreateRecord& r) override { python.on_cache_create(r); }
    void on_cache_insert(const CacheInsertRecord& r) override { python.on_cache_insert(r); }
    void on_cache_size(const CacheSizeRecord& r) override { python.on_cache_size(r); }
    // A class reported by the agent's gc scan comes without a stack: the allocation holding
    // it has the one that created it.
    void on_type_create(const TypeCreateRecord& r) override {
        if (r.stack_id || !r.allocation_seq) return python.on_type_create(r);
        TypeCreateRecord with_stack = r;
        with_stack.stack_id = model_.live_stack_id(r.allocation_seq);
        python.on_type_create(with_stack);
    }
    void on_time_mark(const TimeMarkRecord& r) override {
        clock.add(r.ticks, r.monotonic_ns);
        rss.emplace_back(r.ticks, r.rss_bytes);
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
    bool execed = false;  // an Exec record: the image was replaced, its trace ends there
    std::string command;
    uint64_t start_ticks = 0;
    uint64_t exit_ticks = 0;  // 0 = no Exiting record
    uint64_t last_ticks = 0;
    TickClock clock;
    std::unordered_map<uint64_t, StackNode> nodes;
    std::unordered_map<uint64_t, PyFrameRecord> py_frames;
    std::vector<std::pair<uint64_t, uint64_t>> rss;  // (ticks, bytes)
    std::vector<ChildTrace> children;
    std::vector<TracerErrorRecord> tracer_errors;
    PythonTracker python;

private:
    RetentionModel& model_;
    Symbolizer& symbolizer_;
    bool seen_process_ = false;
    uint32_t generation_ = 0;
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

uint64_t peak_of(const std::vector<WindowBin>& bins) {
    int64_t level = 0, peak = 0;
    for (const WindowBin& b : bins) {
        level += static_cast<int64_t>(b.births_bytes) - static_cast<int64_t>(b.deaths_bytes);
        peak = std::max(peak, level);
    }
    return static_cast<uint64_t>(peak);
}

GrowthSeries dense_series(const StackRetention& s, uint32_t windows, double window_s, size_t work_begin,
                          size_t work_end) {
    GrowthSeries g;
    g.window_s = window_s;
    g.births_bytes.assign(windows, 0);
    g.deaths_bytes.assign(windows, 0);
    g.survivor_bytes.assign(windows, 0);
    for (const WindowBin& b : s.bins) {
        if (b.window >= windows) continue;
        g.births_bytes[b.window] += static_cast<double>(b.births_bytes);
        g.deaths_bytes[b.window] += static_cast<double>(b.deaths_bytes);
    }
    for (const SurvivorBin& b : s.survivors)
        if (b.window < windows) g.survivor_bytes[b.window] += static_cast<double>(b.bytes);
    g.work_begin = work_begin;
    g.work_end = work_end;
    return g;
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
}

// Bytes held at the end of each window, from the sparse births/deaths bins.
std::vector<uint64_t> retained_series(const std::vector<WindowBin>& bins, uint32_t windows) {
    std::vector<uint64_t> out(windows, 0);
    int64_t level = 0;
    size_t i = 0;
    for (uint32_t w = 0; w < windows; ++w) {
        for (; i < bins.size() && bins[i].window <= w; ++i)
            level += static_cast<int64_t>(bins[i].births_bytes) - static_cast<int64_t>(bins[i].deaths_bytes);
        out[w] = static_cast<uint64_t>(std::max<int64_t>(level, 0));
    }
    return out;
}

std::vector<TimelinePoint> build_timeline(const RetentionResult& r, const Collector& c, double window_s) {
    std::vector<TimelinePoint> out;
    int64_t level = 0;
    size_t rss_i = 0;
    uint64_t rss = 0;
    std::vector<std::pair<uint64_t, uint64_t>> marks = c.rss;
    std::sort(marks.begin(), marks.end());
    for (uint32_t w = 0; w < r.num_windows; ++w) {
        level += static_cast<int64_t>(r.heap[w].births_bytes) - static_cast<int64_t>(r.heap[w].deaths_bytes);
        const uint64_t window_end = r.origin_ticks + (uint64_t{w} + 1) * r.window_ticks();
        while (rss_i < marks.size() && marks[rss_i].first < window_end) rss = marks[rss_i++].second;
        out.push_back(TimelinePoint{(w + 1) * window_s, static_cast<uint64_t>(std::max<int64_t>(level, 0)), rss});
    }
    return out;
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

void add_python_findings(AnalysisResult& out, Collector& c, Symbolizer& symbolizer) {
    if (c.python.empty()) return;
    auto seconds = [&](uint64_t ticks) { return c.clock.seconds(static_cast<double>(ticks)); };
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
}  // namespace

size_t finding_count(const AnalysisResult& r) {
    return r.findings.size() + r.cache_findings.size() + r.type_findings.size();
}

AnalysisResult analyze_trace(const std::string& path) {
    RetentionModel model;
    Symbolizer symbolizer;
    Collector c(model, symbolizer);
    const ReadSummary summary = read_trace(path, c);

    AnalysisResult out;
    out.trace_format_version = summary.version;
    out.ended_cleanly = summary.ended_cleanly;
    out.pid = c.pid;
    out.command = c.command;
    out.children = c.children;
    const uint64_t last_ticks = std::max(c.last_ticks, model.max_ticks());

    RetentionResult r = model.finish();
    c.clock.fit();
    double window_s = static_cast<double>(r.window_ticks()) * c.clock.ns_per_tick() / 1e9;
    if (window_s > 0 && window_s < kMinWindowSeconds) {
        const unsigned extra = static_cast<unsigned>(std::ceil(std::log2(kMinWindowSeconds / window_s)));
        r.coarsen(extra);
        window_s *= std::ldexp(1.0, static_cast<int>(extra));
    }
    out.window_s = window_s;
    out.duration_s = std::max(0.0, c.clock.seconds(static_cast<double>(last_ticks)));
    out.totals = r.totals;

    // The span in which the program did any heap work at all.
    size_t work_begin = 0, work_end = 0;
    bool any = false;
    for (uint32_t w = 0; w < r.num_windows; ++w)
        if (r.heap[w].births || r.heap[w].deaths) {
            if (!any) work_begin = w;
            work_end = w;
            any = true;
        }

    // Only stacks that ever held a significant amount are symbolized and classified: the rest
    // cannot become findings and symbolizing them all would dominate the run time.
    std::map<std::string, GroupReport> by_frames;
    std::map<std::string, StackRetention> merged;
    for (StackRetention& s : r.stacks) {
        if (peak_of(s.bins) < kMinSignificantBytes) continue;
        const uint64_t id = s.stack_id;
        std::vector<Frame> frames = resolve_stack(id, c, symbolizer);
        const std::string key = frames_key(frames);
        auto [it, inserted] = merged.try_emplace(key);
        if (inserted) {
            it->second = std::move(s);
            by_frames[key].frames = std::move(frames);
        } else {
            merge_into(it->second, s);
        }
        by_frames[key].stack_ids.push_back(id);
    }

    for (auto& [key, s] : merged) {
        GroupReport g = std::move(by_frames[key]);
        g.frames = fold_interpreter_frames(g.frames);
        g.verdict = classify_growth(dense_series(s, r.num_windows, window_s, work_begin, work_end));
        g.retained_bytes = s.live_bytes;
        g.live_allocations = s.live_count;
        g.allocations = s.allocations;
        g.allocated_bytes = s.allocated_bytes;
        g.retained_series = retained_series(s.bins, r.num_windows);
        if (g.verdict.cls == GrowthClass::Unbounded) out.findings.push_back(std::move(g));
        else out.groups.push_back(std::move(g));
    }
    auto by_retained = [](const GroupReport& a, const GroupReport& b) { return a.retained_bytes > b.retained_bytes; };
    std::sort(out.findings.begin(), out.findings.end(), by_retained);
    std::sort(out.groups.begin(), out.groups.end(), by_retained);
    if (out.groups.size() > kMaxReportedGroups) out.groups.resize(kMaxReportedGroups);

    out.timeline = build_timeline(r, c, window_s);
    add_python_findings(out, c, symbolizer);

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
    if (r.totals.untraced_reuses)
        out.warnings.push_back(fmt::format("{} allocations had their address reused without a traced free", r.totals.untraced_reuses));
    for (auto& w : symbolizer.take_warnings()) out.warnings.push_back(std::move(w));
    return out;
}

}  // namespace growtrace
