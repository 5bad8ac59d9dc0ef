// growtrace diff BEFORE AFTER [--json] [-o OUT]: two runs compared root cause by root cause.
// Each side is a trace or a saved `growtrace analyze --json`.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <string.h>

#include <cerrno>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "analyzer/analysis/analysis.h"
#include "analyzer/analysis/analysis_diff.h"
#include "tools/analyze_command.h"
#include "analyzer/report/report_json.h"
#include "analyzer/read/trace_error.h"
#include "common.h"

namespace growtrace::cli {

namespace {

struct DiffArgs {
    std::string before, after, output;
    bool json = false;
};

// A saved analysis starts with '{'; a trace with its magic. Throws std::runtime_error.
nlohmann::json load_analysis(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("cannot read {}: {}", path, strerror(errno)));
    char first = 0;
    in >> std::ws;
    in.get(first);
    if (first != '{') return report_json(analyze_trace(path));
    in.unget();
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(fmt::format("{} is neither a trace nor a JSON analysis: {}", path, e.what()));
    }
}

int diff(const DiffArgs& args) {
    nlohmann::json result;
    try {
        result = diff_analyses(load_analysis(args.before), load_analysis(args.after));
    } catch (const TraceError& e) {
        return error(e.what());
    } catch (const std::exception& e) {
        return error(e.what());
    }
    std::ofstream file;
    if (!args.output.empty()) {
        file.open(args.output, std::ios::binary | std::ios::trunc);
        if (!file) return error(fmt::format("cannot write {}: {}", args.output, strerror(errno)));
    }
    std::ostream& out = args.output.empty() ? std::cout : file;
    if (args.json) out << result.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    else write_diff_text(result, out);
    out.flush();
    if (!out) return error(fmt::format("cannot write {}: write failed", args.output.empty() ? "stdout" : args.output));
    return diff_has_new_growth(result) ? kExitGrowthFound : kExitOk;
}

}  // namespace

Verb add_diff_verb(CLI::App& parent) {
    auto args = std::make_shared<DiffArgs>();
    CLI::App* sub = parent.add_subcommand(
        "diff",
        "Compare two runs root cause by root cause (gone, still growing, new); exit 3 when AFTER grows where BEFORE "
        "did not.");
    sub->add_option("BEFORE", args->before, "Trace, or JSON from growtrace analyze --json, of the first run")->required();
    sub->add_option("AFTER", args->after, "Trace, or JSON from growtrace analyze --json, of the second run")->required();
    sub->add_flag("--json", args->json, "Write the comparison as JSON");
    sub->add_option("-o,--output", args->output, "Write the comparison to this file instead of stdout");
    return {sub, [args] { return diff(*args); }};
}

}  // namespace growtrace::cli
