#include "analyzer/report/report_html.h"

#include <string_view>

#include "analyzer/report/report_html_assets.h"
#include "analyzer/report/report_json.h"

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

std::string html_page(std::string_view title, std::string_view json_text) {
    // The page's markers are replaced in one pass over the page alone: the text put in their
    // place is never searched, so a marker-like string in the data, the title or a script
    // changes nothing.
    constexpr std::string_view kOpen = "@@GROWTRACE_", kClose = "@@";
    const std::string_view page = report_assets::kReportPage;
    std::string out;
    out.reserve(page.size() + report_assets::kReportStyle.size() + report_assets::kReportFormatScript.size() +
                report_assets::kReportScript.size() +
                json_text.size() + 256);
    size_t at = 0;
    for (size_t open = page.find(kOpen); open != std::string_view::npos; open = page.find(kOpen, at)) {
        const size_t name_at = open + kOpen.size(), close = page.find(kClose, name_at);
        if (close == std::string_view::npos) break;
        const std::string_view name = page.substr(name_at, close - name_at);
        out.append(page.substr(at, open - at));
        if (name == "TITLE") out += html_escape(title);
        else if (name == "DATA") out += json_for_script(std::string(json_text));
        else if (name == "STYLE") out.append(report_assets::kReportStyle);
        else if (name == "FORMAT_SCRIPT") out.append(report_assets::kReportFormatScript);
        else if (name == "SCRIPT") out.append(report_assets::kReportScript);
        else out.append(page.substr(open, close + kClose.size() - open));
        at = close + kClose.size();
    }
    out.append(page.substr(at));
    return out;
}

void write_html_report(const AnalysisResult& result, std::ostream& out) {
    write_html_page(report_json(result), result.command, out);
}

void write_html_page(const nlohmann::json& doc, const std::string& command, std::ostream& out) {
    // Invalid UTF-8 in a symbol or path must not make the report fail: replace it.
    const std::string json_text = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::string title = "growtrace: " + (command.empty() ? std::string("report") : command);
    if (title.size() > 200) title = title.substr(0, 200) + "...";
    out << html_page(title, json_text);
}

}  // namespace growtrace
