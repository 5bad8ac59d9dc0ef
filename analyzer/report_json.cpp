#include "analyzer/report_json.h"

namespace growtrace {

namespace {

using nlohmann::json;

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
    return {{"kind", "unbounded_growth"},
            {"retained_bytes", g.retained_bytes},
            {"live_allocations", g.live_allocations},
            {"allocations", g.allocations},
            {"growth_bytes_per_s", g.verdict.slope_bytes_per_s},
            {"started_at_s", g.verdict.started_at_s},
            {"confidence", g.verdict.confidence},
            {"reason", g.verdict.reason},
            {"stack_ids", g.stack_ids},
            {"frames", frames_json(g.frames)},
            {"allocated_bytes", g.allocated_bytes},
            {"retained_series", g.retained_series}};
}

json group_json(const GroupReport& g) {
    return {{"class", growth_class_name(g.verdict.cls)},
            {"reason", g.verdict.reason},
            {"retained_bytes", g.retained_bytes},
            {"peak_bytes", g.verdict.retained_peak},
            {"live_allocations", g.live_allocations},
            {"allocations", g.allocations},
            {"growth_bytes_per_s", g.verdict.slope_bytes_per_s},
            {"started_at_s", g.verdict.started_at_s},
            {"plateau_at_s", g.verdict.plateau_at_s},
            {"confidence", g.verdict.confidence},
            {"stack_ids", g.stack_ids},
            {"frames", frames_json(g.frames)},
            {"allocated_bytes", g.allocated_bytes},
            {"retained_series", g.retained_series}};
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
    doc["totals"] = {{"allocations", r.totals.allocations},
                     {"frees", r.totals.frees},
                     {"peak_bytes", r.totals.peak_bytes},
                     {"retained_bytes", r.totals.retained_bytes},
                     {"live_allocations", r.totals.live_allocations},
                     {"unmatched_frees", r.totals.unmatched_frees}};
    doc["findings"] = json::array();
    for (const auto& g : r.findings) doc["findings"].push_back(finding_json(g));
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
