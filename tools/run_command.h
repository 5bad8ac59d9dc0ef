// `growtrace run`'s work, shared with `growtrace check`: run a command under the tracer and
// say which traces it wrote.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "sampling_option.h"

namespace growtrace::cli {

struct RunOptions {
    std::string output;
    bool no_follow_exec = false;
    bool no_follow_fork = false;
    bool no_python_objects = false;
    bool keep_helper_traces = false;  // no folding (trace_folding.h)
    SamplingOption sampling;  // default: full tracing
};

// The options `run` and `check` share.
void add_run_options(CLI::App* sub, RunOptions& options);

// What a traced run produced, for callers that go on to analyse it.
struct RunOutcome {
    bool started = false;        // the command ran (else an error was printed)
    std::string trace;           // the main trace, empty if none was written
    std::vector<std::string> other_traces;  // forked children's and exec'd images' traces
};

// Runs the command traced (see cmd_run.cpp). Returns what `growtrace run` exits with: the
// command's status, 128+N if signal N killed it, or kExitError; fills `outcome` if given.
int run_command(const RunOptions& options, std::vector<std::string> command, RunOutcome* outcome = nullptr);

}  // namespace growtrace::cli
