#include "analyzer/report/report_svg.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "analyzer/report/report_text.h"

namespace growtrace {

namespace {

constexpr double kWidth = 1000;
constexpr double kPanelHeight = 250;
constexpr double kLeft = 78, kRight = 20, kTop = 36, kBottom = 58;

// Text content and attribute values: XML escapes, and characters XML 1.0 forbids dropped.
std::string xml_escape(std::string_view s) {
    std::string out;
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (ch) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            default:
                if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') break;
                out += ch;
        }
    }
    // Invalid UTF-8 would make the document unreadable: keep ASCII only if any byte is off.
    size_t i = 0;
    bool valid = true;
    while (i < out.size() && valid) {
        const auto c = static_cast<unsigned char>(out[i]);
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > out.size()) valid = false;
        for (size_t k = 1; valid && k < n; ++k)
            if ((static_cast<unsigned char>(out[i + k]) >> 6) != 2) valid = false;
        i += n ? n : 1;
    }
    if (!valid) {
        std::string ascii;
        for (char ch : out) ascii += static_cast<unsigned char>(ch) < 0x80 ? ch : '?';
        return ascii;
    }
    return out;
}

double nice_step(double range, int ticks) {
    if (!(range > 0)) return 1;
    const double raw = range / ticks;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 ? 2.5 : r <= 5 ? 5 : 10) * mag;
}

std::string seconds_label(double s) {
    if (s == 0) return "0 s";
    if (s < 1) return fmt::format("{:.0f} ms", s * 1000);
    if (s < 120) return fmt::format("{:.{}f} s", s, s < 10 ? 2 : 1);
    return fmt::format("{:.1f} min", s / 60);
}

struct Curve {
    std::string name;
    std::string color;
    std::string dash;  // stroke-dasharray, empty for a solid line
    std::vector<std::pair<double, double>> points;  // (seconds, bytes)
};

// The innermost frame that is not the allocator itself, as "function (file:line)".
std::string group_label(const GroupReport& g) {
    static constexpr std::string_view kAllocators[] = {"operator new", "malloc", "calloc", "realloc", "posix_memalign",
                                                       "aligned_alloc", "memalign", "valloc", "pvalloc", "PyMem_",
                                                       "PyObject_Malloc", "_PyObject_", "std::allocator",
                                                       "std::__new_allocator", "__gnu_cxx::new_allocator"};
    // First pass: skip the allocator and library internals (std::, /usr/include); second: the allocator only.
    for (int pass = 0; pass < 2; ++pass) {
        for (const Frame& f : g.frames) {
            const std::string_view fn(f.function);
            bool skip = false;
            for (std::string_view a : kAllocators) skip = skip || fn.starts_with(a);
            if (pass == 0) skip = skip || fn.starts_with("std::") || fn.starts_with("__gnu_cxx::") || f.file.starts_with("/usr/include/");
            if (skip) continue;
            std::string name = f.function.size() > 80 ? f.function.substr(0, 77) + "..." : f.function;
            return f.file.empty() ? name : fmt::format("{} ({}:{})", name, path_basename(f.file), f.line);
        }
    }
    return g.frames.empty() ? std::string("(no stack)") : g.frames.front().function;
}

std::vector<std::pair<double, double>> series_points(const AnalysisResult& r, const std::vector<uint64_t>& values) {
    std::vector<std::pair<double, double>> pts;
    if (!r.timeline.empty() && !values.empty() && r.timeline.front().t_s > 0) pts.emplace_back(0, 0);
    for (size_t i = 0; i < values.size() && i < r.timeline.size(); ++i)
        pts.emplace_back(r.timeline[i].t_s, static_cast<double>(values[i]));
    return pts;
}

void panel(std::ostream& out, double top, const std::string& title, const std::vector<Curve>& curves, double tmax) {
    const double pw = kWidth - kLeft - kRight, ph = kPanelHeight - kTop - kBottom;
    const double y0 = top + kTop;
    double vmax = 0;
    for (const Curve& c : curves)
        for (auto [t, v] : c.points) vmax = std::max(vmax, v), tmax = std::max(tmax, t);
    if (!(tmax > 0)) tmax = 1;
    const double vstep = nice_step(vmax > 0 ? vmax : 1, 5);
    vmax = std::max(vstep, std::ceil((vmax > 0 ? vmax : 1) / vstep) * vstep);
    auto X = [&](double t) { return kLeft + t / tmax * pw; };
    auto Y = [&](double v) { return y0 + ph - v / vmax * ph; };

    out << fmt::format("<g class=\"panel\">\n<text x=\"{}\" y=\"{:.1f}\" font-size=\"14\" font-weight=\"600\" fill=\"#1d2330\">{}</text>\n",
                       kLeft, top + 22, xml_escape(title));
    out << fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#fbfcfe\" stroke=\"#d9dee7\"/>\n", kLeft,
                       y0, pw, ph);
    for (double v = 0; v <= vmax * (1 + 1e-9); v += vstep) {
        out << fmt::format("<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e6e9ef\"/>\n", kLeft, kLeft + pw, Y(v), Y(v));
        out << fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"11\" fill=\"#5d6677\">{}</text>\n", kLeft - 6,
                           Y(v) + 4, xml_escape(human_bytes(v)));
    }
    const double tstep = nice_step(tmax, 8);
    for (double t = 0; t <= tmax * (1 + 1e-9); t += tstep) {
        out << fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#8a93a3\"/>\n", X(t), y0 + ph,
                           y0 + ph + 4);
        out << fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"11\" fill=\"#5d6677\">{}</text>\n", X(t),
                           y0 + ph + 17, seconds_label(t));
    }
    double lx = kLeft;
    for (const Curve& c : curves) {
        if (c.points.empty()) continue;
        std::string d;
        for (size_t i = 0; i < c.points.size(); ++i)
            d += fmt::format("{}{:.1f},{:.1f}", i ? "L" : "M", X(c.points[i].first), Y(c.points[i].second));
        out << fmt::format("<path class=\"curve\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" stroke-linejoin=\"round\"{}>"
                           "<title>{}</title></path>\n",
                           d, c.color, c.dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", c.dash), xml_escape(c.name));
        out << fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"4\" fill=\"{}\"/>\n", lx, y0 + ph + 30, c.color);
        out << fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11.5\" fill=\"#1d2330\">{}</text>\n", lx + 19, y0 + ph + 36,
                           xml_escape(c.name));
        lx += 34 + 6.4 * static_cast<double>(c.name.size());
    }
    out << "</g>\n";
}

}  // namespace

void write_svg_plot(const AnalysisResult& r, std::ostream& out) {
    static constexpr const char* kColors[] = {"#c62828", "#ef6c00", "#6d4c41", "#ad1457", "#00838f", "#558b2f"};
    const size_t panels = 1 + r.findings.size();
    const double height = 50 + kPanelHeight * static_cast<double>(panels);
    out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out << fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                       "font-family=\"DejaVu Sans, Arial, sans-serif\">\n",
                       kWidth, height);
    out << fmt::format("<title>growtrace: {}</title>\n", xml_escape(r.command));
    out << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
    const std::string verdict =
        r.findings.empty() ? std::string("no unbounded growth found")
                           : fmt::format("{} unbounded growth finding{}", r.findings.size(), r.findings.size() == 1 ? "" : "s");
    std::string command = r.command.size() > 90 ? r.command.substr(0, 90) + "..." : r.command;
    out << fmt::format("<text x=\"{}\" y=\"28\" font-size=\"16\" font-weight=\"700\" fill=\"{}\">{}</text>\n", kLeft,
                       r.findings.empty() ? "#2e7d32" : "#c62828", xml_escape(verdict + " \u2014 " + command));

    std::vector<Curve> memory;
    Curve heap{"traced heap (retained)", "#1565c0", "", {}};
    Curve rss{"RSS (time marks)", "#8e24aa", "6 4", {}};
    if (!r.timeline.empty() && r.timeline.front().t_s > 0) heap.points.emplace_back(0, 0);
    for (const TimelinePoint& p : r.timeline) {
        heap.points.emplace_back(p.t_s, static_cast<double>(p.heap_bytes));
        if (p.rss_bytes) rss.points.emplace_back(p.t_s, static_cast<double>(p.rss_bytes));
    }
    memory.push_back(std::move(heap));
    if (!rss.points.empty()) memory.push_back(std::move(rss));
    panel(out, 40, "Memory over time", memory, r.duration_s);

    for (size_t i = 0; i < r.findings.size(); ++i) {
        const GroupReport& g = r.findings[i];
        Curve c{"retained bytes", kColors[i % std::size(kColors)], "", series_points(r, g.retained_series)};
        std::string title = fmt::format("#{} {}: {} retained, +{}/s", i + 1, group_label(g), human_bytes(static_cast<double>(g.retained_bytes)),
                                        human_bytes(g.verdict.slope_bytes_per_s));
        panel(out, 40 + kPanelHeight * static_cast<double>(i + 1), title, {c}, r.duration_s);
    }
    out << "</svg>\n";
}

}  // namespace growtrace
