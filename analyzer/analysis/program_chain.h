// Which program a trace is of, and the launchers before it: an exec chain (a pyenv shim, env,
// a shell, then python) is one program. Each image exec'd under the tracer names the images it
// was launched through in its Process record (environment::kLaunchers), and a launcher's trace
// names the next image's in its Exec record, so a trace leads to the program at the end of its
// chain, whose Process record names the launchers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyzer/analysis/analysis.h"
#include "analyzer/analysis/trace_set.h"

namespace growtrace {

struct ProgramImage {
    std::string exe;                // empty for a launcher (its record keeps the arguments only)
    std::vector<std::string> argv;
};

struct ProgramChain {
    std::string trace;                    // the trace of the program at the end of the chain
    ProgramImage program;
    std::vector<ProgramImage> launchers;  // in the order they ran, the first the command started
};

// The Process record's launchers field: arguments separated by 0x1F, launchers by 0x1E.
std::vector<ProgramImage> parse_launchers(std::string_view encoded);

// The program and launchers the first record of `path` names. Throws TraceError.
ProgramChain read_program_chain(const std::string& path);

// The trace of the image `result`'s process exec'd into (its Exec record's, found where it says
// or beside `trace`), or "" when it did not exec or that trace is not there.
std::string exec_successor(const AnalysisResult& result, const std::string& trace);

// The program at the end of the exec chain `named` starts: `result`, the analysis of `named`,
// is replaced by that program's. Throws TraceError.
ProgramChain follow_exec_chain(const std::string& named, AnalysisResult& result);

// The program the first trace of `set` leads to through its exec chain, among the set's traces.
ProgramChain program_of_set(const AnalysedTraceSet& set);

// "env bash /root/.pyenv/shims/python3": the first word's name, then the words up to the
// first path (a script), at most three.
std::string describe_launcher(const ProgramImage& image);

// One line: "program: python3.11 (/usr/bin/python3.11) -c ..., launched through 6 launchers:
// env bash /x/python3 → bash /x/python3 → ...". Empty when there are no launchers.
std::string program_line(const ProgramChain& chain);

// {"exe", "argv", "trace"} and [{"argv", "name"}...], for the JSON report.
nlohmann::json program_json(const ProgramChain& chain);
nlohmann::json launchers_json(const ProgramChain& chain);
// Both into a report's document.
void add_program_json(const ProgramChain& chain, nlohmann::json& doc);

}  // namespace growtrace
