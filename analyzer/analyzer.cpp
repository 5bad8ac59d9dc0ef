#include "analyzer/analyzer.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include <set>

#include "analyzer/dump.h"
#include "analyzer/program_chain.h"
#include "analyzer/report_html.h"
#include "analyzer/report_json.h"
#include "analyzer/report_svg.h"
#include "analyzer/report_text.h"
#include "analyzer/trace_error.h"

namespace growtrace {

namespace {

int fail(std::ostream& err, const std::string& message) {
    err << "growtrace: error: " << message << '\n';
    return kExitError;
}

}  // namespace

ProgramChain follow_exec_chain(const std::string& named, AnalysisResult& result) {
    std::string path = named;
    std::set<std::string> seen{path};
    std::vector<ProgramImage> followed;
    while (true) {
        std::string next = exec_successor(result, path);
        if (next.empty() || !seen.insert(next).second) break;
        followed.push_back(ProgramImage{result.exe, result.argv});
        result = analyze_trace(next);
        path = next;
    }
    ProgramChain chain = read_program_chain(path);
    // A trace of an older tracer names no launchers: the ones followed here are all there is.
    if (chain.launchers.empty()) chain.launchers = std::move(followed);
    return chain;
}

int analyze_command(const AnalyzeOptions& options, std::ostream& out, std::ostream& err) {
    if (!options.more_traces.empty() || options.with_children) return analyze_set_command(options, out, err);
    AnalysisResult result;
    ProgramChain chain;
    try {
        result = analyze_trace(options.trace_path);
        // An exec chain is one program: the report is on the image at its end.
        chain = options.follow_exec ? follow_exec_chain(options.trace_path, result)
                                    : read_program_chain(options.trace_path);
    } catch (const TraceError& e) {
        return fail(err, e.what());
    } catch (const std::bad_alloc&) {
        return fail(err, fmt::format("out of memory while analysing {}", options.trace_path));
    }
    return write_reports(result, options, out, err, &chain);
}

int write_reports(const AnalysisResult& result, const AnalyzeOptions& options, std::ostream& out, std::ostream& err,
                  const ProgramChain* chain) {
    auto json = [&] {
        nlohmann::json doc = report_json(result);
        if (chain) add_program_json(*chain, doc);
        return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    if (!options.write_report) {
    } else if (options.json) {
        out << json() << '\n';
    } else {
        if (chain && !program_line(*chain).empty()) out << program_line(*chain) << '\n';
        write_text_report(result, out);
    }
    if (!options.json_output_path.empty()) {
        std::ofstream file(options.json_output_path, std::ios::binary | std::ios::trunc);
        file << json() << '\n';
        if (!file) return fail(err, fmt::format("cannot write {}: {}", options.json_output_path, std::strerror(errno)));
    }
    if (!options.html_output_path.empty()) {
        std::ofstream file(options.html_output_path, std::ios::binary | std::ios::trunc);
        write_html_report(result, file);
        file.flush();
        if (!file) return fail(err, fmt::format("cannot write {}: {}", options.html_output_path, std::strerror(errno)));
    }
    if (!options.svg_output_path.empty()) {
        std::ofstream file(options.svg_output_path, std::ios::binary | std::ios::trunc);
        write_svg_plot(result, file);
        file.flush();
        if (!file) return fail(err, fmt::format("cannot write {}: {}", options.svg_output_path, std::strerror(errno)));
    }
    return options.fail_on_growth && finding_count(result) > 0 ? kExitGrowthFound : kExitOk;
}

int dump_command(const std::string& path, std::ostream& out, std::ostream& err) {
    try {
        dump_trace(path, out);
    } catch (const TraceError& e) {
        out.flush();
        return fail(err, e.what());
    }
    return kExitOk;
}

}  // namespace growtrace
