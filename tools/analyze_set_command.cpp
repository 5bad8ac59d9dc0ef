// analyze_command for several traces: the set analysed, findings merged across processes.
#include <fmt/format.h>

#include "analyzer/analysis/merged_analysis.h"
#include "analyzer/analysis/program_chain.h"
#include "analyzer/analysis/trace_set.h"
#include "analyzer/read/trace_error.h"
#include "analyzer/report/report_html.h"
#include "analyzer/report/report_merged.h"
#include "analyzer/report/report_svg.h"
#include "tools/analyze_command.h"

namespace growtrace {

namespace {

std::string json_text(const nlohmann::json& doc) {
    return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// The merged reports of a set of several traces, to `out` and to the files the options name.
int write_merged_reports(const AnalysedTraceSet& set, const ProgramChain& chain, const AnalyzeOptions& options,
                         std::ostream& out, std::ostream& err) {
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
    const AnalysisResult& first = set.traces.front().result;
    int status = kExitOk;
    if (!options.json_output_path.empty())
        status = write_report_file(options.json_output_path, [&](std::ostream& f) { f << json_text(doc); }, err);
    if (status == kExitOk && !options.html_output_path.empty())
        status = write_report_file(
            options.html_output_path, [&](std::ostream& f) { write_html_page(doc, first.command, f); }, err);
    if (status == kExitOk && !options.svg_output_path.empty()) {
        // The plot draws one process's curves: the first trace's.
        status = write_report_file(options.svg_output_path, [&](std::ostream& f) { write_svg_plot(first, f); }, err);
        if (status == kExitOk)
            err << fmt::format("growtrace: the plot shows the first trace's process only (pid {})\n", first.pid);
    }
    if (status != kExitOk) return status;
    return options.fail_on_growth && !merged.findings.empty() ? kExitGrowthFound : kExitOk;
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
        chain = program_of_set(set);
    } catch (const TraceError& e) {
        return command_error(err, e.what());
    } catch (const std::bad_alloc&) {
        return command_error(err, "out of memory while analysing the traces");
    }
    for (const std::string& w : set.warnings) err << "growtrace: warning: " << w << '\n';
    if (set.traces.size() == 1) return write_reports(set.traces.front().result, options, out, err, &chain);
    return write_merged_reports(set, chain, options, out, err);
}

}  // namespace growtrace
