#include "analyzer/analysis/trace_set.h"

#include <deque>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "analyzer/read/trace_error.h"

namespace growtrace {

namespace {

namespace fs = std::filesystem;

// The child's trace where the record says, or beside its parent's (a set moved elsewhere).
std::string locate_child(const std::string& recorded, const std::string& parent) {
    std::error_code ec;
    if (fs::is_regular_file(recorded, ec)) return recorded;
    fs::path beside = fs::path(parent).parent_path() / fs::path(recorded).filename();
    if (fs::is_regular_file(beside, ec)) return beside.string();
    return {};
}

}  // namespace

std::string trace_file_identity(const std::string& path) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(path, ec);
    return ec ? path : canonical.string();
}

AnalysedTraceSet analyze_trace_set(const std::vector<std::string>& paths, const TraceSetOptions& options) {
    AnalysedTraceSet set;
    std::set<std::string> seen;
    bool first = true;
    for (const std::string& named : paths) {
        const bool required = first || !options.only_first_required;
        first = false;
        if (!seen.insert(trace_file_identity(named)).second) continue;
        // Depth first, so that each trace is followed by its own descendants.
        std::deque<std::string> pending{named};
        bool is_named = required;
        while (!pending.empty()) {
            std::string path = pending.front();
            pending.pop_front();
            AnalysedTrace t{path, {}};
            try {
                t.result = analyze_trace(path, options.analysis);
            } catch (const TraceError& e) {
                if (is_named) throw;
                set.warnings.push_back(fmt::format("left out {}: {}", path, e.what()));
                continue;
            }
            is_named = false;
            if (options.with_children) {
                std::vector<std::string> children;
                for (const ChildTrace& child : t.result.children) {
                    if (child.path.empty()) {
                        // A tracer before exec'd images were named in the Exec record.
                        if (child.kind == "exec")
                            set.warnings.push_back(fmt::format(
                                "{} records an exec but not the name of the exec'd program's trace (an older "
                                "growtrace wrote it): analyse that <stem>.exec<N>.gtrace by name",
                                path));
                        continue;
                    }
                    std::string found = locate_child(child.path, path);
                    if (found.empty()) {
                        set.warnings.push_back(fmt::format("the trace of {} is missing: {}",
                                                           child.kind == "fork"
                                                               ? fmt::format("child process {}", child.pid)
                                                               : std::string("an exec'd program"),
                                                           child.path));
                        continue;
                    }
                    if (seen.insert(trace_file_identity(found)).second) children.push_back(found);
                }
                pending.insert(pending.begin(), children.begin(), children.end());
            }
            set.traces.push_back(std::move(t));
        }
    }
    return set;
}

}  // namespace growtrace
