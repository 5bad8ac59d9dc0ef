#include "analyzer/report/report_merged.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "analyzer/report/report_json.h"
#include "analyzer/report/report_text.h"
#include "analyzer/model/units.h"

namespace growtrace {

namespace {

using nlohmann::json;

uint64_t whole(double v) { return v > 0 ? static_cast<uint64_t>(std::llround(v)) : 0; }

// Index of a finding in its process's JSON "findings" (finding_id is 1-based).
size_t json_index(const AnalysisResult& r, const ProcessFindingRef& ref) {
    return finding_id(r, FindingRef{ref.kind, ref.index}) - 1;
}

std::string pid_list(const AnalysedTraceSet& set, const std::vector<ProcessFindingRef>& refs) {
    std::vector<std::string> pids;
    for (const ProcessFindingRef& r : refs) pids.push_back(std::to_string(set.traces[r.trace].result.pid));
    return fmt::format("{}", fmt::join(pids, ", "));
}

// Seconds from the earliest process start to this process's start (0 when a start is unknown).
std::vector<double> start_offsets(const AnalysedTraceSet& set) {
    uint64_t earliest = 0;
    for (const AnalysedTrace& t : set.traces)
        if (t.result.start_realtime_ns && (!earliest || t.result.start_realtime_ns < earliest))
            earliest = t.result.start_realtime_ns;
    std::vector<double> out;
    for (const AnalysedTrace& t : set.traces)
        out.push_back(t.result.start_realtime_ns && earliest
                          ? static_cast<double>(t.result.start_realtime_ns - earliest) / 1e9
                          : 0.0);
    return out;
}

// The processes' curves on one time grid, from the earliest start: a process counts 0 before it
// started and its last value after its trace ends (what it held at its end, as the totals do).
class CommonGrid {
public:
    explicit CommonGrid(const AnalysedTraceSet& set) : set_(set), offsets_(start_offsets(set)) {
        double span = 0, widest = 0;
        for (size_t i = 0; i < set.traces.size(); ++i) {
            span = std::max(span, offsets_[i] + set.traces[i].result.duration_s);
            widest = std::max(widest, set.traces[i].result.window_s);
        }
        window_s_ = std::max({widest, span / 512, 1e-3});
        windows_ = static_cast<size_t>(std::ceil(span / window_s_));
    }
    double window_s() const { return window_s_; }
    size_t windows() const { return windows_; }
    double offset(size_t trace) const { return offsets_[trace]; }

    // Adds trace's per-window series (at the end of each of its windows) into sum.
    template <typename Value>
    void add(size_t trace, const std::vector<Value>& series, std::vector<double>& sum) const {
        sum.resize(windows_, 0);
        if (series.empty()) return;
        const double w = set_.traces[trace].result.window_s;
        for (size_t k = 0; k < windows_; ++k) {
            const double local = (static_cast<double>(k) + 1) * window_s_ - offsets_[trace];
            if (w <= 0 || local < w) continue;
            const size_t j = std::min(series.size() - 1, static_cast<size_t>(local / w) - 1);
            sum[k] += static_cast<double>(series[j]);
        }
    }

private:
    const AnalysedTraceSet& set_;
    std::vector<double> offsets_;
    double window_s_ = 0;
    size_t windows_ = 0;
};

json merged_finding_json(const AnalysedTraceSet& set, const MergedAnalysis& merged, const MergedFinding& f,
                         const std::vector<json>& docs, const CommonGrid& grid) {
    const ProcessFindingRef& lead = f.in.front();
    json j = docs[lead.trace]["findings"][json_index(set.traces[lead.trace].result, lead)];
    j["retained_bytes"] = whole(f.total.retained_bytes);
    j["live_allocations"] = whole(f.total.live_allocations);
    j["growth_bytes_per_s"] = f.total.growth_bytes_per_s;
    j["started_at_s"] = f.total.started_at_s;
    j["confidence"] = f.total.confidence;
    if (f.kind == FindingKind::Stack) {
        std::vector<double> series;
        for (const ProcessFindingRef& r : f.in) grid.add(r.trace, set.traces[r.trace].result.findings[r.index].retained_series, series);
        std::vector<uint64_t> whole_series;
        for (double v : series) whole_series.push_back(whole(v));
        j["retained_series"] = whole_series;
        j["explained_by_cache"] = f.explained_by_cache.empty() ? json(nullptr) : json(f.explained_by_cache);
    }
    const ProgramGroup& program = merged.programs[f.program];
    json per_process = json::array();
    json pids = json::array();
    for (const ProcessFindingRef& r : f.in) {
        const AnalysisResult& res = set.traces[r.trace].result;
        const FindingFigures fig = figures_of(set.traces, r);
        pids.push_back(res.pid);
        per_process.push_back({{"pid", res.pid},
                               {"trace", set.traces[r.trace].path},
                               {"finding_index", json_index(res, r)},
                               {"retained_bytes", whole(fig.retained_bytes)},
                               {"growth_bytes_per_s", fig.growth_bytes_per_s},
                               {"live_allocations", whole(fig.live_allocations)},
                               {"started_at_s", fig.started_at_s},
                               {"confidence", fig.confidence}});
    }
    j["program"] = program.command;
    j["processes_with_finding"] = f.in.size();
    j["processes_of_program"] = program.traces.size();
    j["pids"] = pids;
    j["per_process"] = per_process;
    j["summary"] = merged_summary(set, merged, f);
    return j;
}

// Concatenates one array of every process's document, each entry marked with its pid.
json concatenated(const AnalysedTraceSet& set, const std::vector<json>& docs, const char* field) {
    json out = json::array();
    for (size_t i = 0; i < docs.size(); ++i)
        for (json entry : docs[i][field]) {
            entry["pid"] = set.traces[i].result.pid;
            out.push_back(std::move(entry));
        }
    return out;
}

}  // namespace

std::string merged_summary(const AnalysedTraceSet& set, const MergedAnalysis& merged, const MergedFinding& f) {
    const ProgramGroup& program = merged.programs[f.program];
    // The program is named only where there are several to tell apart.
    std::string command = program.command.size() > 60 ? program.command.substr(0, 57) + "..." : program.command;
    std::string of = merged.programs.size() > 1 ? fmt::format(" of `{}`", command) : "";
    std::string where = fmt::format("in {} of {} process{}{} (pid{} {})", f.in.size(), program.traces.size(),
                                    program.traces.size() == 1 ? "" : "es", of, f.in.size() == 1 ? "" : "s",
                                    pid_list(set, f.in));
    if (f.kind == FindingKind::Types) {
        return fmt::format("{}: {} alive in all", where, whole(f.total.live_allocations));
    }
    const std::string low = human_bytes(f.min_retained), high = human_bytes(f.max_retained);
    const std::string each = f.in.size() == 1 ? low : low == high ? low + " each" : low + " to " + high + " each";
    return fmt::format("{}: {}, +{}/s in all", where, each, human_bytes(f.total.growth_bytes_per_s));
}

// Root causes across processes: a merged finding is placed where its lead process (the one
// where it retains most) places it: the root of its root cause there, or evidence of the
// merged finding that holds that root. Each process's own tree is in processes[].report.
void add_merged_root_causes(json& doc, const AnalysedTraceSet& set, const MergedAnalysis& merged) {
    auto merged_index_of = [&](size_t trace, FindingRef ref) -> std::optional<size_t> {
        for (size_t m = 0; m < merged.findings.size(); ++m)
            for (const ProcessFindingRef& in : merged.findings[m].in)
                if (in.trace == trace && in.kind == ref.kind && in.index == ref.index) return m;
        return std::nullopt;
    };
    struct Placement {
        size_t root = 0;
        const RootCause* cause = nullptr;
        Relation relation = Relation::SameCall;
    };
    std::vector<Placement> placed(merged.findings.size());
    for (size_t m = 0; m < merged.findings.size(); ++m) {
        placed[m].root = m;
        const MergedFinding& f = merged.findings[m];
        if (f.in.empty()) continue;
        const ProcessFindingRef& lead = f.in.front();
        const FindingRef own{lead.kind, lead.index};
        for (const RootCause& rc : set.traces[lead.trace].result.root_causes) {
            const bool is_root = rc.root == own;
            auto member = std::find_if(rc.members.begin(), rc.members.end(), [&](const RootCauseMember& x) { return x.finding == own; });
            if (!is_root && member == rc.members.end()) continue;
            placed[m].cause = &rc;
            if (!is_root) {
                if (auto root = merged_index_of(lead.trace, rc.root)) placed[m].root = *root;
                placed[m].relation = member->relation;
            }
            break;
        }
    }
    json& findings = doc["findings"];
    doc["root_causes"] = json::array();
    std::vector<size_t> cause_id(merged.findings.size(), 0);
    // Root causes in one trace's order (root_causes.cpp): caches, containers, classes, stacks.
    auto cause_rank = [](FindingKind k) {
        switch (k) {
            case FindingKind::Cache: return 0;
            case FindingKind::Container: return 1;
            case FindingKind::Types: return 2;
            case FindingKind::Stack: return 3;
        }
        return 3;
    };
    std::vector<size_t> roots;
    for (size_t m = 0; m < merged.findings.size(); ++m)
        if (placed[m].root == m) roots.push_back(m);
    std::stable_sort(roots.begin(), roots.end(), [&](size_t a, size_t b) {
        return cause_rank(merged.findings[a].kind) < cause_rank(merged.findings[b].kind);
    });
    for (size_t m : roots) {
        const MergedFinding& f = merged.findings[m];
        cause_id[m] = doc["root_causes"].size() + 1;
        const RootCause* rc = placed[m].cause;
        doc["root_causes"].push_back({{"id", cause_id[m]},
                                      {"finding", m + 1},
                                      {"kind", finding_kind_name(f.kind)},
                                      {"title", rc ? rc->title : findings[m].value("reason", "")},
                                      {"summary", merged_summary(set, merged, f)},
                                      {"remedy", rc ? rc->remedy : ""},
                                      {"retained_bytes", whole(f.total.retained_bytes)},
                                      {"growth_bytes_per_s", f.total.growth_bytes_per_s},
                                      {"members", json::array()}});
    }
    for (size_t m = 0; m < merged.findings.size(); ++m) {
        findings[m]["id"] = m + 1;
        const size_t root = placed[m].root;
        findings[m]["root_cause"] = cause_id[root];
        findings[m]["role"] = root == m ? "root" : "evidence";
        if (root != m)
            doc["root_causes"][cause_id[root] - 1]["members"].push_back(
                {{"finding", m + 1}, {"relation", relation_name(placed[m].relation)}});
    }
}

json merged_report_json(const AnalysedTraceSet& set, const MergedAnalysis& merged) {
    std::vector<json> docs;
    for (const AnalysedTrace& t : set.traces) docs.push_back(report_json(t.result));
    // The first trace's document is the base: every field of the one-trace schema is there.
    json doc = docs.front();
    const CommonGrid grid(set);

    double duration = 0;
    bool ended_cleanly = true;
    json totals = doc["totals"];
    for (auto& [key, value] : totals.items()) value = 0;
    std::vector<double> heap, rss;
    for (size_t i = 0; i < set.traces.size(); ++i) {
        const AnalysisResult& r = set.traces[i].result;
        duration = std::max(duration, grid.offset(i) + r.duration_s);
        ended_cleanly = ended_cleanly && r.ended_cleanly;
        for (auto& [key, value] : totals.items()) value = value.get<double>() + docs[i]["totals"][key].get<double>();
        std::vector<uint64_t> h, s;
        for (const TimelinePoint& p : r.timeline) {
            h.push_back(p.heap_bytes);
            s.push_back(p.rss_bytes);
        }
        grid.add(i, h, heap);
        grid.add(i, s, rss);
    }
    for (auto& [key, value] : totals.items()) value = whole(value.get<double>());
    doc["duration_s"] = duration;
    doc["window_s"] = grid.window_s();
    doc["ended_cleanly"] = ended_cleanly;
    doc["totals"] = totals;
    // Totals at window ends: a sum of each process's own peak would overstate the pool's.
    double peak = 0;
    doc["timeline"] = json::array();
    for (size_t k = 0; k < grid.windows(); ++k) {
        const double h = k < heap.size() ? heap[k] : 0, s = k < rss.size() ? rss[k] : 0;
        peak = std::max(peak, h);
        doc["timeline"].push_back({{"t", (static_cast<double>(k) + 1) * grid.window_s()},
                                   {"heap_bytes", whole(h)},
                                   {"rss_bytes", whole(s)}});
    }
    doc["totals"]["peak_bytes"] = whole(peak);

    doc["findings"] = json::array();
    for (const MergedFinding& f : merged.findings)
        doc["findings"].push_back(merged_finding_json(set, merged, f, docs, grid));
    add_merged_root_causes(doc, set, merged);
    doc["caches"] = concatenated(set, docs, "caches");
    doc["containers"] = concatenated(set, docs, "containers");
    doc["types"] = concatenated(set, docs, "types");
    doc["groups"] = concatenated(set, docs, "groups");
    doc["children"] = concatenated(set, docs, "children");
    json warnings = set.warnings;
    for (size_t i = 0; i < docs.size(); ++i)
        for (const json& w : docs[i]["warnings"])
            warnings.push_back(fmt::format("pid {}: {}", set.traces[i].result.pid, w.get<std::string>()));
    doc["warnings"] = warnings;

    json programs = json::array();
    for (const ProgramGroup& p : merged.programs) {
        json pids = json::array();
        for (size_t i : p.traces) pids.push_back(set.traces[i].result.pid);
        programs.push_back({{"command", p.command}, {"pids", pids}});
    }
    json processes = json::array();
    for (size_t i = 0; i < docs.size(); ++i) {
        const AnalysisResult& r = set.traces[i].result;
        processes.push_back({{"pid", r.pid},
                             {"trace", set.traces[i].path},
                             {"command", r.command},
                             {"started_at_s", grid.offset(i)},
                             {"findings", finding_count(r)},
                             {"report", docs[i]}});
    }
    doc["merged"] = {{"traces", set.traces.size()}, {"programs", programs}};
    doc["processes"] = processes;
    return doc;
}

void write_merged_text_report(const AnalysedTraceSet& set, const MergedAnalysis& merged, std::ostream& out) {
    for (const std::string& w : set.warnings) out << "warning: " << w << '\n';
    for (const AnalysedTrace& t : set.traces)
        for (const std::string& w : t.result.warnings) out << fmt::format("warning: pid {}: {}\n", t.result.pid, w);
    size_t shown = 0;
    for (const MergedFinding& f : merged.findings)
        if (f.explained_by_cache.empty()) ++shown;
    out << fmt::format("{} traces, {} program{}:\n", set.traces.size(), merged.programs.size(),
                       merged.programs.size() == 1 ? "" : "s");
    for (const ProgramGroup& p : merged.programs) {
        std::vector<std::string> pids;
        for (size_t i : p.traces) pids.push_back(std::to_string(set.traces[i].result.pid));
        out << fmt::format("  `{}`: {} process{} (pid{} {})\n", p.command, p.traces.size(),
                           p.traces.size() == 1 ? "" : "es", p.traces.size() == 1 ? "" : "s", fmt::join(pids, ", "));
    }
    if (merged.findings.empty()) out << "no unbounded growth found in any process\n";
    else out << fmt::format("{} unbounded growth finding{} across the processes\n", shown, shown == 1 ? "" : "s");

    size_t number = 0;
    for (const MergedFinding& f : merged.findings) {
        if (!f.explained_by_cache.empty()) continue;
        const AnalysisResult& lead = set.traces[f.in.front().trace].result;
        const std::vector<Frame>* frames = nullptr;
        std::string what;
        switch (f.kind) {
            case FindingKind::Cache: {
                const CacheReport& c = lead.cache_findings[f.in.front().index];
                what = fmt::format("cache {} keeps growing", c.cache.name);
                frames = &c.inserted_from;
                break;
            }
            case FindingKind::Types: {
                const TypeReport& t = lead.type_findings[f.in.front().index];
                what = fmt::format("class {} is created again and again", t.type.name);
                frames = &t.created_from;
                break;
            }
            case FindingKind::Stack: {
                what = "a stack keeps growing";
                frames = &lead.findings[f.in.front().index].frames;
                break;
            }
            case FindingKind::Container: {
                const ContainerReport& c = lead.container_findings[f.in.front().index];
                what = fmt::format("{} {} keeps growing", c.container.kind, c.container.name);
                frames = &c.inserted_from;
                break;
            }
        }
        out << fmt::format("\n#{} {} {}\n", ++number, what, merged_summary(set, merged, f));
        for (const ProcessFindingRef& r : f.in) {
            const AnalysisResult& res = set.traces[r.trace].result;
            const FindingFigures fig = figures_of(set.traces, r);
            std::string detail;
            if (r.kind == FindingKind::Cache) {
                const CacheFinding& c = res.cache_findings[r.index].cache;
                detail = fmt::format("{} -> {} entries, ", c.entries_first, c.entries_last);
            } else if (r.kind == FindingKind::Types) {
                const TypeFinding& t = res.type_findings[r.index].type;
                detail = fmt::format("{} created, {} alive, ", t.created, t.live_at_end);
            } else if (r.kind == FindingKind::Container) {
                const ContainerFinding& c = res.container_findings[r.index].container;
                detail = fmt::format("{} -> {} entries, ", c.entries_first, c.entries_last);
            }
            out << fmt::format("    pid {}: {}{} retained, +{}/s since {:.1f} s, confidence {:.2f}\n", res.pid, detail,
                               human_bytes(fig.retained_bytes), human_bytes(fig.growth_bytes_per_s), fig.started_at_s,
                               fig.confidence);
        }
        size_t explained = 0;
        double explained_bytes = 0;
        if (f.kind == FindingKind::Cache) {
            const std::string& name = lead.cache_findings[f.in.front().index].cache.name;
            for (const MergedFinding& g : merged.findings)
                if (g.program == f.program && g.explained_by_cache == name) {
                    ++explained;
                    explained_bytes += g.total.retained_bytes;
                }
        }
        if (explained)
            out << fmt::format("    its entries are what {} more growing stack{} hold ({} in all); --json marks them "
                               "explained_by_cache\n",
                               explained, explained == 1 ? "" : "s", human_bytes(explained_bytes));
        const bool filled = f.kind == FindingKind::Cache || f.kind == FindingKind::Container;
        out << fmt::format("    {} from:\n", filled ? "filled" : f.kind == FindingKind::Types ? "created" : "allocated");
        write_frames(*frames, out);
    }
    out << '\n';
    for (const AnalysedTrace& t : set.traces) {
        const AnalysisResult& r = t.result;
        out << fmt::format("pid {}: {} finding{}, {:.1f} s, {} retained at the end ({})\n", r.pid, finding_count(r),
                           finding_count(r) == 1 ? "" : "s", r.duration_s, human_bytes(r.totals.retained_bytes), t.path);
    }
}

}  // namespace growtrace
