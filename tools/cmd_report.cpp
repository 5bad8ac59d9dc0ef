// growtrace report TRACE... [--with-children] [-o report.html]
//
// Writes the HTML report of a trace (or, for an -o ending in .svg, the SVG plot of its curves).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <iostream>
#include <memory>
#include <sstream>

#include "contracts/trace_names.h"
#include "tools/analyze_command.h"
#include "common.h"
#include "progress.h"

namespace growtrace::cli {

namespace {

struct ReportArgs {
    std::vector<std::string> traces;
    bool with_children = false;
    std::string output;
};

// "run.gtrace" -> "run.html"
std::string default_output(const std::string& trace) {
    return std::string(trace_names::stem(trace)) + ".html";
}

int report(const ReportArgs& args) {
    AnalyzeOptions options;
    options.trace_path = args.traces.front();
    options.more_traces.assign(args.traces.begin() + 1, args.traces.end());
    options.with_children = args.with_children;
    options.write_report = false;
    const std::string output = args.output.empty() ? default_output(args.traces.front()) : args.output;
    if (output.ends_with(".svg")) options.svg_output_path = output;
    else options.html_output_path = output;

    std::ostringstream out, err;
    int status;
    {
        ReadProgress progress;
        status = analyze_command(options, out, err);
    }
    std::cerr << err.str();
    if (status == kExitOk) note(fmt::format("report written to {}", output));
    return status;
}

}  // namespace

Verb add_report_verb(CLI::App& parent) {
    auto args = std::make_shared<ReportArgs>();
    CLI::App* sub = parent.add_subcommand(
        "report",
        "Write the report of a trace as one self-contained HTML page (memory over time, each finding "
        "with its curve and stack, flame graphs of retained memory and of growth).");
    add_trace_set_arguments(sub, args->traces, args->with_children,
                            "several make one report, findings merged across processes");
    sub->add_option("-o,--output", args->output,
                    "HTML file to write (default: the trace's name with .html); a name ending in .svg "
                    "gets the SVG plot of the curves instead");
    return {sub, [args] { return report(*args); }};
}

}  // namespace growtrace::cli
