#include "analyzer/report_html.h"

#include <string_view>

#include "analyzer/report_html_template.h"
#include "analyzer/report_json.h"

namespace growtrace {

namespace {

std::string html_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

}  // namespace

std::string json_for_script(const std::string& json_text) {
    std::string out;
    out.reserve(json_text.size() + 64);
    for (char c : json_text) {
        if (c == '<') out += "\\u003c";
        else out += c;
    }
    return out;
}

void write_html_report(const AnalysisResult& result, std::ostream& out) {
    write_html_page(report_json(result), result.command, out);
}

void write_html_page(const nlohmann::json& doc, const std::string& command, std::ostream& out) {
    // Invalid UTF-8 in a symbol or path must not make the report fail: replace it.
    const std::string json_text = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::string page(kHtmlReportTemplate);
    std::string title = "growtrace: " + (command.empty() ? std::string("report") : command);
    if (title.size() > 200) title = title.substr(0, 200) + "...";
    // Both markers are located in the template before anything is substituted (the title
    // comes first), so a marker-like string inside the data or the title changes nothing.
    constexpr std::string_view kTitle = "@@GROWTRACE_TITLE@@", kData = "@@GROWTRACE_DATA@@";
    const size_t title_at = page.find(kTitle), data_at = page.find(kData);
    if (data_at != std::string::npos) page.replace(data_at, kData.size(), json_for_script(json_text));
    if (title_at != std::string::npos && title_at < data_at) page.replace(title_at, kTitle.size(), html_escape(title));
    out << page;
}

}  // namespace growtrace
