// growtrace analyze TRACE... [--with-children] [--json] [-o OUT] [--fail-on-growth] [--html FILE] [--plot FILE.svg]
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <string.h>

#include <cerrno>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "tools/analyze_command.h"
#include "common.h"
#include "progress.h"

namespace growtrace::cli {

namespace {

struct AnalyzeArgs {
    std::vector<std::string> traces;
    bool with_children = false;
    bool no_follow_exec = false;
    std::string output;
    bool json = false;
    bool fail_on_growth = false;
    std::string html;
    std::string plot;
};

int analyze(const AnalyzeArgs& args) {
    AnalyzeOptions options;
    options.trace_path = args.traces.front();
    options.more_traces.assign(args.traces.begin() + 1, args.traces.end());
    options.with_children = args.with_children;
    options.follow_exec = !args.no_follow_exec;
    options.json = args.json;
    options.fail_on_growth = args.fail_on_growth;
    options.html_output_path = args.html;
    options.svg_output_path = args.plot;
    ReadProgress progress;

    // Errors are held back until the progress line is gone.
    std::ostringstream err;
    auto analyze_to = [&](std::ostream& out) {
        int status = analyze_command(options, out, err);
        progress.clear();
        std::cerr << err.str();
        return status;
    };
    if (args.output.empty()) return analyze_to(std::cout);

    std::ofstream out(args.output, std::ios::binary | std::ios::trunc);
    if (!out) return error(fmt::format("cannot write report to {}: {}", args.output, strerror(errno)));
    int status = analyze_to(out);
    out.flush();
    if (!out) return error(fmt::format("cannot write report to {}: write failed", args.output));
    return status;
}

}  // namespace

void add_trace_set_arguments(CLI::App* sub, std::vector<std::string>& traces, bool& with_children,
                             const std::string& merged) {
    sub->add_option("TRACE", traces, "Trace file(s) written by growtrace run; " + merged)->required();
    sub->add_flag("--with-children", with_children,
                  "Also take the traces of the processes the named ones forked or exec'd (their Fork and Exec "
                  "records, followed down)");
}

Verb add_analyze_verb(CLI::App& parent) {
    auto args = std::make_shared<AnalyzeArgs>();
    CLI::App* sub = parent.add_subcommand(
        "analyze",
        "Classify retained memory per allocation stack as unbounded, bounded or transient, and "
        "report unbounded growth.");
    add_trace_set_arguments(sub, args->traces, args->with_children,
                            "several are analysed together, their findings merged across processes");
    sub->add_flag("--no-follow-exec", args->no_follow_exec,
                  "Report on the named trace's own image even if it exec'd another program (by default a "
                  "launcher's trace, a shim's or a shell's, leads to the program at the end of its exec chain)");
    sub->add_flag("--json", args->json, "Write the report as JSON");
    sub->add_option("-o,--output", args->output, "Write the report to this file instead of stdout");
    sub->add_flag("--fail-on-growth", args->fail_on_growth, "Exit with status 3 if unbounded growth was found");
    sub->add_option("--html", args->html, "Also write the report as one self-contained HTML page to this file");
    sub->add_option("--plot", args->plot, "Also write the memory curves (heap, RSS, each finding) as an SVG image to this file");
    return {sub, [args] { return analyze(*args); }};
}

}  // namespace growtrace::cli
