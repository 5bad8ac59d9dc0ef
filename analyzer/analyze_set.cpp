// analyze_command for several traces: the set analysed, findings merged across processes.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "analyzer/analyzer.h"
#include "analyzer/merged_analysis.h"
#include "analyzer/program_chain.h"
#include "analyzer/report_html.h"
#include "analyzer/report_merged.h"
#include "analyzer/report_svg.h"
#include "analyzer/trace_error.h"
#include "analyzer/trace_set.h"

namespace growtrace {

namespace {

int fail(std::ostream& err, const std::string& message) {
    err << "growtrace: error: " << message << '\n';
    return kExitError;
}

std::string json_text(const nlohmann::json& doc) {
    return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string identity(const std::string& path) {
    std::error_code ec;
    std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : canonical.string();
}

// The program the first named trace leads to through its exec chain, among the set's traces.
ProgramChain set_program(const AnalysedTraceSet& set) {
    const AnalysedTrace* at = &set.traces.front();
    std::vector<ProgramImage> followed;
    for (size_t steps = 0; steps < set.traces.size(); ++steps) {
        std::string next = exec_successor(at->result, at->path);
        if (next.empty()) break;
        const AnalysedTrace* found = nullptr;
        for (const AnalysedTrace& t : set.traces)
            if (identity(t.path) == identity(next)) found = &t;
        if (!found) break;
        followed.push_back(ProgramImage{at->result.exe, at->result.argv});
        at = found;
    }
    ProgramChain chain = read_program_chain(at->path);
    if (chain.launchers.empty()) chain.launchers = std::move(followed);
    return chain;
}

}  // namespace

int analyze_set_command(const AnalyzeOptions& options, std::ostream& out, std::ostream& err) {
    std::vector<std::string> paths{options.trace_path};
    paths.insert(paths.end(), options.more_traces.begin(), options.more_traces.end());
    TraceSetOptions set_options;
    set_options.with_children = options.with_children;
    set_options.only_first_required = options.only_first_required;
    AnalysedTraceSet set;
    ProgramChain chain;
    try {
        set = analyze_trace_set(paths, set_options);
        chain = set_program(set);
    } catch (const TraceError& e) {
        return fail(err, e.what());
    } catch (const std::bad_alloc&) {
        return fail(err, "out of memory while analysing the traces");
    }
    for (const std::string& w : set.warnings) err << "growtrace: warning: " << w << '\n';
    if (set.traces.size() == 1) return write_reports(set.traces.front().result, options, out, err, &chain);

    const MergedAnalysis merged = merge_findings(set.traces);
    nlohmann::json doc;
    const bool need_json = options.json || !options.json_output_path.empty() || !options.html_output_path.empty();
    if (need_json) {
        doc = merged_report_json(set, merged);
        add_program_json(chain, doc);
    }
    if (!options.write_report) {
    } else if (options.json) {
        out << json_text(doc);
    } else {
        if (!program_line(chain).empty()) out << program_line(chain) << '\n';
        write_merged_text_report(set, merged, out);
    }
    if (!options.json_output_path.empty()) {
        std::ofstream file(options.json_output_path, std::ios::binary | std::ios::trunc);
        file << json_text(doc);
        if (!file) return fail(err, fmt::format("cannot write {}: {}", options.json_output_path, std::strerror(errno)));
    }
    if (!options.html_output_path.empty()) {
        std::ofstream file(options.html_output_path, std::ios::binary | std::ios::trunc);
        write_html_page(doc, set.traces.front().result.command, file);
        file.flush();
        if (!file) return fail(err, fmt::format("cannot write {}: {}", options.html_output_path, std::strerror(errno)));
    }
    if (!options.svg_output_path.empty()) {
        // The plot draws one process's curves: the first trace's.
        std::ofstream file(options.svg_output_path, std::ios::binary | std::ios::trunc);
        write_svg_plot(set.traces.front().result, file);
        file.flush();
        if (!file) return fail(err, fmt::format("cannot write {}: {}", options.svg_output_path, std::strerror(errno)));
        err << fmt::format("growtrace: the plot shows the first trace's process only (pid {})\n",
                           set.traces.front().result.pid);
    }
    return options.fail_on_growth && !merged.findings.empty() ? kExitGrowthFound : kExitOk;
}

}  // namespace growtrace
