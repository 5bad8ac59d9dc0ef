// growtrace export --format pprof -o OUT.pb.gz [--with-children] TRACE...
//
// Writes the profiles of one or more traces in a format other tools read: pprof (gzip-compressed
// profile.proto, for go tool pprof, Grafana Pyroscope, Parca). See analyzer/report/export_pprof.h.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <string.h>

#include <cerrno>
#include <fstream>
#include <memory>

#include "analyzer/report/export_pprof.h"
#include "analyzer/read/trace_error.h"
#include "analyzer/analysis/trace_set.h"
#include "common.h"
#include "progress.h"

namespace growtrace::cli {

namespace {

struct ExportArgs {
    std::string format;
    std::string output;
    bool with_children = false;
    std::vector<std::string> traces;
};

int export_traces(const ExportArgs& args) {
    TraceSetOptions options;
    options.with_children = args.with_children;
    options.analysis.stack_profiles = true;
    AnalysedTraceSet set;
    std::string data;
    try {
        ReadProgress progress;
        set = analyze_trace_set(args.traces, options);
        std::vector<const AnalysisResult*> results;
        for (const AnalysedTrace& t : set.traces) results.push_back(&t.result);
        data = gzip_compress(pprof_profile(results));
    } catch (const TraceError& e) {
        return error(e.what());
    } catch (const std::runtime_error& e) {
        return error(e.what());
    }
    for (const std::string& w : set.warnings) warning(w);
    std::ofstream out(args.output, std::ios::binary | std::ios::trunc);
    if (!out) return error(fmt::format("cannot write {}: {}", args.output, strerror(errno)));
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) return error(fmt::format("cannot write {}: write failed", args.output));
    note(fmt::format("pprof profile of {} trace{} written to {}", set.traces.size(), set.traces.size() == 1 ? "" : "s",
                     args.output));
    return 0;
}

}  // namespace

Verb add_export_verb(CLI::App& parent) {
    auto args = std::make_shared<ExportArgs>();
    CLI::App* sub = parent.add_subcommand(
        "export",
        "Write the allocation profile of one or more traces for other tools: --format pprof gives a "
        "gzip-compressed pprof profile (go tool pprof, Grafana Pyroscope, Parca) with in-use and "
        "allocated space and objects, the growth rate per stack and each stack's verdict.");
    sub->add_option("--format", args->format, "Output format")->required()->check(CLI::IsMember({"pprof"}));
    sub->add_option("-o,--output", args->output, "File to write (e.g. profile.pb.gz)")->required();
    add_trace_set_arguments(sub, args->traces, args->with_children, "several make one profile, samples labelled by pid");
    return {sub, [args] { return export_traces(*args); }};
}

}  // namespace growtrace::cli
