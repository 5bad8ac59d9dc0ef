#include "analyzer/report/report_json.h"

#include <cmath>

namespace growtrace {

namespace {

using nlohmann::json;

// Estimates (sampled traces) as whole numbers, like the exact figures of full traces.
uint64_t whole(double v) { return v > 0 ? static_cast<uint64_t>(std::llround(v)) : 0; }

// Fields added for sampled traces (0 and 0 in a full trace, whose figures are exact).
void add_sampling_fields(json& j, uint64_t samples, uint64_t live_samples, double stderr_bytes) {
    j["samples"] = samples;
    j["live_samples"] = live_samples;
    j["retained_bytes_stderr"] = stderr_bytes;
}

// A teardown the verdict was judged before (null fields when there was none).
void add_teardown_fields(json& j, double teardown_at_s, double released_bytes) {
    j["teardown_at_s"] = teardown_at_s > 0 ? json(teardown_at_s) : json(nullptr);
    j["released_at_teardown_bytes"] = teardown_at_s > 0 ? json(whole(released_bytes)) : json(nullptr);
}

json frames_json(const std::vector<Frame>& frames) {
    json out = json::array();
    for (const Frame& f : frames) {
        out.push_back({{"function", f.function},
                       {"file", f.file},
                       {"line", f.line},
                       {"module", path_basename(f.module_path)},
                       {"module_path", f.module_path},
                       {"ip", f.ip}});
    }
    return out;
}

json finding_json(const GroupReport& g) {
    json j = {{"kind", "unbounded_growth"},
            {"retained_bytes", g.retained_bytes},
            {"live_allocations", g.live_allocations},
            {"allocations", g.allocations},
            {"growth_bytes_per_s", g.verdict.slope_bytes_per_s},
            {"growth_bytes_per_1k_allocations", g.verdict.bytes_per_1k_allocations},
            {"started_at_s", g.verdict.started_at_s},
            {"confidence", g.verdict.confidence},
            {"reason", g.verdict.reason},
            {"projected_growth_bytes_per_day", g.significance.projected_bytes_per_day},
            {"heap_growth_share", g.significance.heap_growth_share},
            {"significance", g.significance.reason},
            {"stack_ids", g.stack_ids},
            {"frames", frames_json(g.frames)},
            {"allocated_bytes", g.allocated_bytes},
            {"retained_series", g.retained_series},
            {"explained_by_cache", g.explained_by_cache.empty() ? json(nullptr) : json(g.explained_by_cache)}};
    add_sampling_fields(j, g.samples, g.live_samples, g.retained_bytes_stderr);
    add_teardown_fields(j, g.verdict.teardown_at_s, g.verdict.released_at_teardown);
    return j;
}

json group_json(const GroupReport& g) {
    json j = {{"class", growth_class_name(g.verdict.cls)},
            {"reason", g.verdict.reason},
            {"retained_bytes", g.retained_bytes},
            {"peak_bytes", g.verdict.retained_peak},
            {"live_allocations", g.live_allocations},
            {"allocations", g.allocations},
            {"growth_bytes_per_s", g.verdict.slope_bytes_per_s},
            {"growth_bytes_per_1k_allocations", g.verdict.bytes_per_1k_allocations},
            {"started_at_s", g.verdict.started_at_s},
            {"plateau_at_s", g.verdict.plateau_at_s},
            {"confidence", g.verdict.confidence},
            {"stack_ids", g.stack_ids},
            {"frames", frames_json(g.frames)},
            {"allocated_bytes", g.allocated_bytes},
            {"retained_series", g.retained_series}};
    if (g.verdict.cls == GrowthClass::Unbounded) {
        j["projected_growth_bytes_per_day"] = g.significance.projected_bytes_per_day;
        j["heap_growth_share"] = g.significance.heap_growth_share;
        j["significance"] = g.significance.reason;
    }
    add_sampling_fields(j, g.samples, g.live_samples, g.retained_bytes_stderr);
    add_teardown_fields(j, g.verdict.teardown_at_s, g.verdict.released_at_teardown);
    return j;
}

json series_json(const std::vector<SeriesPoint>& points) {
    json out = json::array();
    for (const SeriesPoint& p : points) out.push_back({p.t_s, p.value});
    return out;
}

json cache_json(const CacheReport& c) {
    const CacheFinding& f = c.cache;
    json key_types = json::array();
    for (const CacheKeyType& k : f.key_types)
        key_types.push_back({{"name", k.name}, {"distinct_classes", k.distinct_classes}, {"live_classes", k.live_classes}});
    json j = {{"name", f.name},
            {"wrapped", f.wrapped},
            {"bound_names", f.bound_names},
            {"location", f.location},
            {"maxsize", f.maxsize < 0 ? json(nullptr) : json(f.maxsize)},
            {"entries_first", f.entries_first},
            {"entries_last", f.entries_last},
            {"insertions", f.insertions},
            {"growth_entries_per_s", f.growth_entries_per_s},
            {"inserted_from", frames_json(c.inserted_from)},
            {"retained_bytes", f.retained_bytes},
            {"live_allocations", f.live_allocations},
            {"key_types", key_types},
            {"example_keys", f.example_keys},
            {"verdict", f.unbounded ? "unbounded" : f.undetermined ? "undetermined" : "bounded"},
            {"reason", f.reason},
            {"entries_over_time", series_json(f.entries_over_time)},
            {"retained_over_time", series_json(f.retained_over_time)}};
    j["retained_samples"] = f.retained_samples;
    j["retained_bytes_stderr"] = f.retained_bytes_stderr;
    j["entries_before_teardown"] = f.teardown_at_s > 0 ? json(f.entries_before_teardown) : json(nullptr);
    add_teardown_fields(j, f.teardown_at_s, static_cast<double>(f.released_at_teardown_bytes));
    return j;
}

json cache_finding_json(const CacheReport& c) {
    const CacheFinding& f = c.cache;
    json j = {{"kind", "cache_growth"},
            {"retained_bytes", f.retained_bytes},
            {"live_allocations", f.live_allocations},
            {"growth_bytes_per_s", f.growth_bytes_per_s},
            {"started_at_s", f.started_at_s},
            {"confidence", f.confidence},
            {"reason", f.reason},
            {"frames", frames_json(c.inserted_from)},
            {"cache", cache_json(c)}};
    j["live_samples"] = f.retained_samples;
    j["retained_bytes_stderr"] = f.retained_bytes_stderr;
    add_teardown_fields(j, f.teardown_at_s, static_cast<double>(f.released_at_teardown_bytes));
    return j;
}

json type_json(const TypeReport& t) {
    const TypeFinding& f = t.type;
    return {{"name", f.name},
            {"created", f.created},
            {"live_at_end", f.live_at_end},
            {"created_per_s", f.created_per_s},
            {"started_at_s", f.started_at_s},
            {"verdict", f.unbounded ? "unbounded" : "bounded"},
            {"reason", f.reason},
            {"created_from", frames_json(t.created_from)},
            {"live_over_time", series_json(f.live_over_time)}};
}

json type_finding_json(const TypeReport& t) {
    const TypeFinding& f = t.type;
    return {{"kind", "duplicate_types"},
            {"retained_bytes", 0},
            {"live_allocations", f.live_at_end},
            {"growth_bytes_per_s", 0},
            {"started_at_s", f.started_at_s},
            {"confidence", f.confidence},
            {"reason", f.reason},
            {"frames", frames_json(t.created_from)},
            {"type", type_json(t)}};
}

json container_json(const ContainerReport& c) {
    const ContainerFinding& f = c.container;
    return {{"name", f.name},
            {"owner_type", f.owner_type},
            {"kind", f.kind},
            {"reached_from_module", f.reached_from_module},
            {"walks", f.walks},
            {"entries_first", f.entries_first},
            {"entries_last", f.entries_last},
            {"growth_entries_per_s", f.growth_entries_per_s},
            {"inserted_from", frames_json(c.inserted_from)},
            {"key_types", f.key_types},
            {"value_types", f.value_types},
            {"retained_bytes", f.retained_bytes},
            {"verdict", f.unbounded ? "unbounded" : "bounded"},
            {"reason", f.reason},
            {"entries_over_time", series_json(f.entries_over_time)}};
}

json container_finding_json(const ContainerReport& c) {
    const ContainerFinding& f = c.container;
    return {{"kind", "container_growth"},
            {"retained_bytes", f.retained_bytes},
            {"growth_bytes_per_s", f.growth_bytes_per_s},
            {"started_at_s", f.started_at_s},
            {"confidence", f.confidence},
            {"reason", f.reason},
            {"frames", frames_json(c.inserted_from)},
            {"container", container_json(c)}};
}

json root_cause_json(const AnalysisResult& r, size_t id, const RootCause& root) {
    json members = json::array();
    for (const RootCauseMember& m : root.members)
        members.push_back({{"finding", finding_id(r, m.finding)}, {"relation", relation_name(m.relation)}});
    return {{"id", id},
            {"finding", finding_id(r, root.root)},
            {"kind", finding_kind_name(root.root.kind)},
            {"title", root.title},
            {"summary", root.summary},
            {"remedy", root.remedy},
            {"retained_bytes", root.retained_bytes},
            {"growth_bytes_per_s", root.growth_bytes_per_s},
            {"members", members}};
}

// Root causes, and on each finding its id, its root cause and whether it is that root or
// evidence of it: added fields, so readers of the flat list see nothing change.
void add_root_causes(json& doc, const AnalysisResult& r) {
    json& findings = doc["findings"];
    for (size_t i = 0; i < findings.size(); ++i) findings[i]["id"] = i + 1;
    doc["root_causes"] = json::array();
    for (size_t i = 0; i < r.root_causes.size(); ++i) {
        const RootCause& root = r.root_causes[i];
        const size_t id = i + 1;
        doc["root_causes"].push_back(root_cause_json(r, id, root));
        json& rooted = findings[finding_id(r, root.root) - 1];
        rooted["root_cause"] = id;
        rooted["role"] = "root";
        for (const RootCauseMember& m : root.members) {
            json& member = findings[finding_id(r, m.finding) - 1];
            member["root_cause"] = id;
            member["role"] = "evidence";
        }
    }
}

// The tracer's ledger against the file (analyzer/model/ledger.h). `checked` false: the trace has no
// Ledger record (an older tracer, or the program ended before the tracer's last flush).
json ledger_json(const LedgerCheck& l) {
    json out = {{"checked", l.present},
                {"file_allocations", l.file_allocations},
                {"file_frees", l.file_frees},
                {"file_live", l.file_live()}};
    if (!l.present) return out;
    const LedgerRecord& t = l.tracer;
    out["balanced"] = l.balanced();
    out["tracer"] = {{"allocations_recorded", t.allocations_recorded}, {"frees_recorded", t.frees_recorded},
                     {"allocations_written", t.allocations_written},   {"frees_written", t.frees_written},
                     {"live", t.live},                                 {"weightless", t.weightless},
                     {"untraced_frees", t.untraced_frees},             {"inferred_frees", t.inferred_frees},
                     {"lost_events", t.lost_events}};
    return out;
}

}  // namespace

json report_json(const AnalysisResult& r) {
    json doc;
    doc["format_version"] = kJsonFormatVersion;
    doc["command"] = r.command;
    doc["pid"] = r.pid;
    doc["duration_s"] = r.duration_s;
    doc["window_s"] = r.window_s;
    doc["trace_format_version"] = r.trace_format_version;
    doc["ended_cleanly"] = r.ended_cleanly;
    // A sampled trace's figures are estimates (format/sampling.h); mean_bytes 0: exact.
    doc["sampling"] = {{"mean_bytes", r.sample_period}};
    doc["totals"] = {{"allocations", whole(r.totals.allocations)},
                     {"frees", whole(r.totals.frees)},
                     {"peak_bytes", whole(r.totals.peak_bytes)},
                     {"retained_bytes", whole(r.totals.retained_bytes)},
                     {"live_allocations", whole(r.totals.live_allocations)},
                     {"unmatched_frees", r.totals.unmatched_frees},
                     {"samples", r.totals.samples},
                     {"live_samples", r.totals.live_samples}};
    doc["ledger"] = ledger_json(r.ledger);
    // Cache findings lead: they name the cause; the stacks they hold may also be findings.
    doc["findings"] = json::array();
    for (const auto& c : r.cache_findings) doc["findings"].push_back(cache_finding_json(c));
    for (const auto& t : r.type_findings) doc["findings"].push_back(type_finding_json(t));
    for (const auto& g : r.findings) doc["findings"].push_back(finding_json(g));
    // Added after the stacks, so that the other findings keep their ids.
    for (const auto& c : r.container_findings) doc["findings"].push_back(container_finding_json(c));
    add_root_causes(doc, r);
    doc["containers"] = json::array();
    for (const auto& c : r.containers) doc["containers"].push_back(container_json(c));
    doc["caches"] = json::array();
    for (const auto& c : r.caches) doc["caches"].push_back(cache_json(c));
    doc["types"] = json::array();
    for (const auto& t : r.types) doc["types"].push_back(type_json(t));
    doc["groups"] = json::array();
    for (const auto& g : r.groups) doc["groups"].push_back(group_json(g));
    doc["timeline"] = json::array();
    for (const auto& p : r.timeline)
        doc["timeline"].push_back({{"t", p.t_s}, {"heap_bytes", p.heap_bytes}, {"rss_bytes", p.rss_bytes}});
    doc["children"] = json::array();
    for (const auto& c : r.children) doc["children"].push_back({{"kind", c.kind}, {"pid", c.pid}, {"path", c.path}});
    doc["warnings"] = r.warnings;
    return doc;
}

}  // namespace growtrace
