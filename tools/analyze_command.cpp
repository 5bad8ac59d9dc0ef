#include "tools/analyze_command.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "analyzer/analysis/program_chain.h"
#include "analyzer/read/trace_error.h"
#include "analyzer/report/dump.h"
#include "analyzer/report/report_html.h"
#include "analyzer/report/report_json.h"
#include "analyzer/report/report_svg.h"
#include "analyzer/report/report_text.h"

namespace growtrace {

int command_error(std::ostream& err, const std::string& message) {
    err << "growtrace: error: " << message << '\n';
    return kExitError;
}

int write_report_file(const std::string& path, const std::function<void(std::ostream&)>& write, std::ostream& err) {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    write(file);
    file.flush();
    if (!file) return command_error(err, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    return kExitOk;
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
        return command_error(err, e.what());
    } catch (const std::bad_alloc&) {
        return command_error(err, fmt::format("out of memory while analysing {}", options.trace_path));
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
    int status = kExitOk;
    if (!options.json_output_path.empty())
        status = write_report_file(options.json_output_path, [&](std::ostream& f) { f << json() << '\n'; }, err);
    if (status == kExitOk && !options.html_output_path.empty())
        status = write_report_file(options.html_output_path, [&](std::ostream& f) { write_html_report(result, f); }, err);
    if (status == kExitOk && !options.svg_output_path.empty())
        status = write_report_file(options.svg_output_path, [&](std::ostream& f) { write_svg_plot(result, f); }, err);
    if (status != kExitOk) return status;
    return options.fail_on_growth && finding_count(result) > 0 ? kExitGrowthFound : kExitOk;
}

int dump_command(const std::string& path, std::ostream& out, std::ostream& err) {
    try {
        dump_trace(path, out);
    } catch (const TraceError& e) {
        out.flush();
        return command_error(err, e.what());
    }
    return kExitOk;
}

}  // namespace growtrace
