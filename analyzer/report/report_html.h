// The HTML report: one self-contained page (inline CSS, JS and SVG; nothing fetched) that
// shows the process's memory over time, each finding with its curve, verdict and stack, flame
// graphs of retained memory and of growth, and the groups that are not findings.
//
// The page embeds the JSON document of report_json() and draws everything from it in the
// browser, so the JSON report stays the single source of truth for what a report contains.
// The page, its stylesheet and its scripts are the files of analyzer/report/report_html/, built into
// the binary (cmake/EmbedAssets.cmake); report.html marks where each goes with @@GROWTRACE_X@@.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>

#include "analyzer/analysis/analysis.h"

namespace growtrace {

void write_html_report(const AnalysisResult& result, std::ostream& out);
// The page for a report document already made (the merged report of several traces).
void write_html_page(const nlohmann::json& doc, const std::string& command, std::ostream& out);

// The JSON text made safe to sit inside <script type="application/json">: every '<' is
// written as \u003c, so no "</script>" or "<!--" can appear. Exposed for tests.
std::string json_for_script(const std::string& json_text);

// The page of report.html with its markers filled in: the title (escaped), the data (made safe
// by json_for_script), the stylesheet and the scripts. Exposed for tests.
std::string html_page(std::string_view title, std::string_view json_text);

}  // namespace growtrace
