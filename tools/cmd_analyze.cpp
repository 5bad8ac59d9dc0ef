// growtrace analyze TRACE [--json] [-o OUT] [--fail-on-growth]
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <string.h>

#include <cerrno>
#include <fstream>
#include <iostream>
#include <memory>

#include "analyzer/analyzer.h"
#include "common.h"

namespace growtrace::cli {

namespace {

struct AnalyzeArgs {
    std::string trace;
    std::string output;
    bool json = false;
    bool fail_on_growth = false;
};

int analyze(const AnalyzeArgs& args) {
    AnalyzeOptions options;
    options.trace_path = args.trace;
    options.json = args.json;
    options.fail_on_growth = args.fail_on_growth;

    if (args.output.empty()) return analyze_command(options, std::cout, std::cerr);

    std::ofstream out(args.output, std::ios::binary | std::ios::trunc);
    if (!out) return error(fmt::format("cannot write report to {}: {}", args.output, strerror(errno)));
    int status = analyze_command(options, out, std::cerr);
    out.flush();
    if (!out) return error(fmt::format("cannot write report to {}: write failed", args.output));
    return status;
}

}  // namespace

Verb add_analyze_verb(CLI::App& parent) {
    auto args = std::make_shared<AnalyzeArgs>();
    CLI::App* sub = parent.add_subcommand(
        "analyze",
        "Classify retained memory per allocation stack as unbounded, bounded or transient, and "
        "report unbounded growth.");
    sub->add_option("TRACE", args->trace, "Trace file written by growtrace run")->required();
    sub->add_flag("--json", args->json, "Write the report as JSON");
    sub->add_option("-o,--output", args->output, "Write the report to this file instead of stdout");
    sub->add_flag("--fail-on-growth", args->fail_on_growth, "Exit with status 3 if unbounded growth was found");
    return {sub, [args] { return analyze(*args); }};
}

}  // namespace growtrace::cli
