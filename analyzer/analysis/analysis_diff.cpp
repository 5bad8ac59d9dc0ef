#include "analyzer/analysis/analysis_diff.h"

#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "analyzer/model/units.h"

namespace growtrace {

namespace {

using nlohmann::json;

// Frames that name the stack's work: the innermost few, by function and file name.
constexpr size_t kKeyFrames = 8;

std::string basename_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

const json& root_finding(const json& analysis, const json& root_cause) {
    const size_t id = root_cause.at("finding").get<size_t>();
    const json& findings = analysis.at("findings");
    if (id == 0 || id > findings.size()) throw std::invalid_argument(fmt::format("root cause names finding {}, which is not in the report", id));
    return findings[id - 1];
}

std::string stack_key(const json& frames) {
    std::string key;
    size_t taken = 0;
    for (const json& f : frames) {
        const std::string function = f.value("function", "");
        // Allocator frames differ between libc builds and say nothing about the work.
        if (f.value("module", "") != "python" && (function.starts_with("malloc") || function.starts_with("operator new") ||
                                                  function == "calloc" || function == "realloc" || function == "??"))
            continue;
        key += function + "@" + basename_of(f.value("file", "")) + ";";
        if (++taken == kKeyFrames) break;
    }
    return key;
}

json figures(const json& root_cause) {
    return {{"retained_bytes", root_cause.value("retained_bytes", uint64_t{0})},
            {"growth_bytes_per_s", root_cause.value("growth_bytes_per_s", 0.0)},
            {"summary", root_cause.value("summary", "")}};
}

const char* rate_change(double before, double after) {
    if (before <= 0) return after > 0 ? "faster" : "same";
    if (after >= before * kRateChangeFactor) return "faster";
    if (after * kRateChangeFactor <= before) return "slower";
    return "same";
}

json side(const json& analysis) {
    return {{"command", analysis.value("command", "")},
            {"pid", analysis.value("pid", uint64_t{0})},
            {"duration_s", analysis.value("duration_s", 0.0)},
            {"root_causes", analysis.at("root_causes").size()}};
}

void require_root_causes(const json& analysis, const char* which) {
    if (!analysis.is_object() || !analysis.contains("findings"))
        throw std::invalid_argument(fmt::format("{} is not a growtrace analysis (no \"findings\")", which));
    if (!analysis.contains("root_causes"))
        throw std::invalid_argument(fmt::format(
            "{} has no \"root_causes\": it was written by an older growtrace; analyse its trace again", which));
}

std::map<std::string, const json*> by_key(const json& analysis) {
    std::map<std::string, const json*> out;
    for (const json& rc : analysis.at("root_causes")) out.emplace(root_cause_key(analysis, rc), &rc);
    return out;
}

}  // namespace

std::string root_cause_key(const json& analysis, const json& root_cause) {
    const json& f = root_finding(analysis, root_cause);
    const std::string kind = f.value("kind", "");
    if (kind == "cache_growth") return "cache " + f.at("cache").value("name", "");
    if (kind == "duplicate_types") return "classes " + f.at("type").value("name", "");
    return "stack " + stack_key(f.value("frames", json::array()));
}

json diff_analyses(const json& before, const json& after) {
    require_root_causes(before, "BEFORE");
    require_root_causes(after, "AFTER");
    const auto old_roots = by_key(before), new_roots = by_key(after);
    json news = json::array(), still = json::array(), gone = json::array();
    for (const auto& [key, rc] : new_roots) {
        json entry = {{"key", key}, {"kind", rc->value("kind", "")}, {"title", rc->value("title", "")}, {"after", figures(*rc)}};
        auto old = old_roots.find(key);
        if (old == old_roots.end()) {
            entry["status"] = "new";
            entry["change"] = nullptr;
            entry["before"] = nullptr;
            news.push_back(std::move(entry));
        } else {
            entry["status"] = "still_growing";
            entry["before"] = figures(*old->second);
            entry["change"] = rate_change(old->second->value("growth_bytes_per_s", 0.0), rc->value("growth_bytes_per_s", 0.0));
            still.push_back(std::move(entry));
        }
    }
    for (const auto& [key, rc] : old_roots) {
        if (new_roots.count(key)) continue;
        gone.push_back({{"key", key}, {"kind", rc->value("kind", "")}, {"title", rc->value("title", "")}, {"status", "gone"},
                        {"change", nullptr}, {"before", figures(*rc)}, {"after", nullptr}});
    }
    json all = json::array();
    for (json* list : {&news, &still, &gone})
        for (json& e : *list) all.push_back(std::move(e));
    return {{"format_version", kDiffFormatVersion}, {"before", side(before)}, {"after", side(after)}, {"root_causes", all}};
}

bool diff_has_new_growth(const json& diff) {
    for (const json& rc : diff.at("root_causes"))
        if (rc.at("status") == "new") return true;
    return false;
}

void write_diff_text(const json& diff, std::ostream& out) {
    const json& b = diff.at("before");
    const json& a = diff.at("after");
    out << fmt::format("before: {} (pid {}, {:.1f} s): {} root cause{}\n", b.value("command", ""), b.value("pid", 0),
                       b.value("duration_s", 0.0), b.value("root_causes", 0), b.value("root_causes", 0) == 1 ? "" : "s");
    out << fmt::format("after:  {} (pid {}, {:.1f} s): {} root cause{}\n", a.value("command", ""), a.value("pid", 0),
                       a.value("duration_s", 0.0), a.value("root_causes", 0), a.value("root_causes", 0) == 1 ? "" : "s");
    if (diff.at("root_causes").empty()) {
        out << "no unbounded growth in either\n";
        return;
    }
    for (const json& rc : diff.at("root_causes")) {
        const std::string status = rc.at("status");
        auto rate = [](const json& f) { return human_bytes(f.value("growth_bytes_per_s", 0.0)); };
        if (status == "new") {
            out << fmt::format("\nnew: {}\n    after: {}\n", rc.value("title", ""), rc.at("after").value("summary", ""));
        } else if (status == "gone") {
            out << fmt::format("\ngone: {}\n    before: {}\n", rc.value("title", ""), rc.at("before").value("summary", ""));
        } else {
            const std::string change = rc.at("change");
            out << fmt::format("\nstill growing{}: {} (+{}/s before, +{}/s after)\n    before: {}\n    after: {}\n",
                               change == "same" ? "" : ", " + change, rc.value("title", ""), rate(rc.at("before")),
                               rate(rc.at("after")), rc.at("before").value("summary", ""), rc.at("after").value("summary", ""));
        }
    }
}

}  // namespace growtrace
