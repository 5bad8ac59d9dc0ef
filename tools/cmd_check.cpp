// growtrace check [-o FILE] [--no-follow-exec] [--no-follow-fork] [--html F] [--json F] [--plot F]
//                 -- COMMAND [ARGS...]
//
// For CI: runs COMMAND traced (as `growtrace run`), analyses every trace it wrote, prints the
// text report and exits
//   0  no unbounded growth and the command succeeded,
//   3  unbounded growth found (whatever the command's status),
//   4  no growth found, but the command failed (non-zero exit, or killed by a signal),
//   2  growtrace itself could not do the check (bad usage, command not found or not traceable,
//      no trace written, unreadable main trace).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <iostream>
#include <memory>
#include <sstream>

#include "tools/analyze_command.h"
#include "common.h"
#include "progress.h"
#include "run_command.h"

namespace growtrace::cli {

namespace {

struct CheckArgs {
    RunOptions run;
    std::string html;
    std::string json;
    std::string plot;
};

// Analyses the run's traces, printing the text report to stdout: the main trace's own report,
// or, when the command forked or exec'd traced processes, one report of them all with the
// findings merged across processes. Returns analyze_command's status.
int analyze_run(const RunOutcome& outcome, const CheckArgs& reports) {
    AnalyzeOptions options;
    options.trace_path = outcome.trace;
    options.more_traces = outcome.other_traces;
    options.only_first_required = true;
    options.fail_on_growth = true;
    options.html_output_path = reports.html;
    options.json_output_path = reports.json;
    options.svg_output_path = reports.plot;
    std::ostringstream out, err;
    int status;
    {
        ReadProgress progress;
        status = analyze_command(options, out, err);
    }
    std::cout << out.str() << std::flush;
    std::cerr << err.str();
    return status;
}

int check(const CheckArgs& args, std::vector<std::string> command) {
    if (command.empty()) return error("no command given; usage: growtrace check [OPTIONS] -- COMMAND [ARGS...]");
    RunOutcome outcome;
    const int command_status = run_command(args.run, std::move(command), &outcome);
    if (!outcome.started) return kExitError;  // run_command said why
    if (outcome.trace.empty()) return error("check: no trace was written, so nothing could be checked");

    if (outcome.other_traces.empty()) std::cout << fmt::format("growtrace check: {}\n", outcome.trace) << std::flush;
    else
        std::cout << fmt::format("growtrace check: {} and {} more trace{} of the processes it started\n", outcome.trace,
                                 outcome.other_traces.size(), outcome.other_traces.size() == 1 ? "" : "s")
                  << std::flush;
    const int status = analyze_run(outcome, args);
    if (status == kExitError) return kExitError;
    const bool growth = status == kExitGrowthFound;

    if (command_status != 0)
        note(fmt::format("the command failed (growtrace run status {}){}", command_status,
                         growth ? "" : "; check exits with 4"));
    if (growth) {
        note("check failed: unbounded memory growth found (exit status 3)");
        return kExitGrowthFound;
    }
    if (command_status != 0) return kExitCommandFailed;
    note("check passed: no unbounded memory growth");
    return kExitOk;
}

}  // namespace

Verb add_check_verb(CLI::App& parent, const Trailing& trailing) {
    auto args = std::make_shared<CheckArgs>();
    CLI::App* sub = parent.add_subcommand(
        "check",
        "For CI: run COMMAND traced, analyse its traces, print the report.\n"
        "Usage: growtrace check [OPTIONS] -- COMMAND [ARGS...]\n"
        "Exits 0 if there is no unbounded growth and the command succeeded, 3 if there is growth, "
        "4 if there is none but the command failed, 2 if the check could not be done.");
    add_run_options(sub, args->run);
    sub->add_option("--html", args->html,
                    "Also write the HTML report to this file (of every trace the run wrote, merged, if it wrote several)");
    sub->add_option("--json", args->json,
                    "Also write the JSON report to this file (of every trace the run wrote, merged, if it wrote several)");
    sub->add_option("--plot", args->plot, "Also write the SVG plot of the main trace's curves to this file");
    sub->prefix_command();

    return {sub, [sub, args, &trailing] {
                std::vector<std::string> command = sub->remaining();
                if (!command.empty() && command[0].starts_with("-")) {
                    return error(fmt::format("check: unknown option {} (put the command after '--')", command[0]));
                }
                if (trailing.present) {
                    if (!command.empty()) command.push_back("--");
                    command.insert(command.end(), trailing.words.begin(), trailing.words.end());
                }
                return check(*args, std::move(command));
            }};
}

}  // namespace growtrace::cli
