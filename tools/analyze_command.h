// The command line's side of analysing: `growtrace analyze`, `report`, `check` and `dump` turn
// the analyzer's results (analyzer/analysis/) into the reports they ask for, the files they
// name and an exit status, and the analyzer's errors into one "growtrace: error:" line. The
// analyzer itself returns results and throws TraceError; it knows no exit code.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis.h"
#include "analyzer/analysis/program_chain.h"
#include "contracts/status_codes.h"

namespace growtrace {

struct AnalyzeOptions {
    std::string trace_path;
    bool json = false;            // JSON report instead of text
    bool fail_on_growth = false;  // exit kExitGrowthFound when there is a finding
    // If set, the JSON report is also written to this file (whatever `json` says).
    std::string json_output_path;
    // If set, the HTML report (report_html.h) / the SVG plot (report_svg.h) is written there.
    std::string html_output_path;
    std::string svg_output_path;
    // If false, nothing is written to `out` (only the files above).
    bool write_report = true;
    // Analysed with trace_path as one set (trace_set.h): more traces, and the traces of the
    // processes they forked or exec'd. A set of several traces gets the merged report
    // (report_merged.h); a set of one, the report of that trace.
    std::vector<std::string> more_traces;
    bool with_children = false;
    bool only_first_required = false;  // TraceSetOptions::only_first_required
    // A trace whose process exec'd (a launcher: a shim, env, a shell) leads to the trace of the
    // program at the end of its exec chain, which is reported on (program_chain.h). False: the
    // named trace's own image.
    bool follow_exec = true;
};

// Analyses the trace and writes the report to out. Returns kExitOk, kExitGrowthFound (only
// with fail_on_growth), or kExitError after writing one line "growtrace: error: ..." to err.
int analyze_command(const AnalyzeOptions& options, std::ostream& out, std::ostream& err);

// The reports of an analysed trace, as analyze_command writes them (same options and status).
// With `chain`, the reports also say which program it is and which launchers it went through
// (the JSON report's "program" and "launchers", a line before the text report).
int write_reports(const AnalysisResult& result, const AnalyzeOptions& options, std::ostream& out, std::ostream& err,
                  const ProgramChain* chain = nullptr);

// analyze_command for a set (more_traces or with_children): analyze_set_command.cpp.
int analyze_set_command(const AnalyzeOptions& options, std::ostream& out, std::ostream& err);

// "growtrace: error: <message>" on err; returns kExitError.
int command_error(std::ostream& err, const std::string& message);

// Writes a report file with `write` (given the open stream). kExitOk, or kExitError with the
// line saying which file could not be written.
int write_report_file(const std::string& path, const std::function<void(std::ostream&)>& write, std::ostream& err);

// Prints every record of the trace to out. Returns kExitOk, or kExitError with one line on err
// (what was readable before the damage is still printed).
int dump_command(const std::string& path, std::ostream& out, std::ostream& err);

}  // namespace growtrace
