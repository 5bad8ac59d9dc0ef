#include "analyzer/analyzer.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "analyzer/dump.h"
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

int analyze_command(const AnalyzeOptions& options, std::ostream& out, std::ostream& err) {
    if (!options.more_traces.empty() || options.with_children) return analyze_set_command(options, out, err);
    AnalysisResult result;
    try {
        result = analyze_trace(options.trace_path);
    } catch (const TraceError& e) {
        return fail(err, e.what());
    } catch (const std::bad_alloc&) {
        return fail(err, fmt::format("out of memory while analysing {}", options.trace_path));
    }
    return write_reports(result, options, out, err);
}

int write_reports(const AnalysisResult& result, const AnalyzeOptions& options, std::ostream& out, std::ostream& err) {
    if (!options.write_report) {
    } else if (options.json) {
        out << report_json(result).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    } else {
        write_text_report(result, out);
    }
    if (!options.json_output_path.empty()) {
        std::ofstream file(options.json_output_path, std::ios::binary | std::ios::trunc);
        file << report_json(result).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
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
