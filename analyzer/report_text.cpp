#include "analyzer/report_text.h"

#include <cmath>

#include <fmt/format.h>

namespace growtrace {

std::string human_bytes(double b) {
    const char* units[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (std::fabs(b) >= 1000 && u < 4) {
        b /= 1000;
        ++u;
    }
    return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}

namespace {

// Frames beyond this are elided: the insertion point is near the leaf, main() is not news.
constexpr size_t kMaxPrintedFrames = 16;

void write_frames(const std::vector<Frame>& frames, std::ostream& out) {
    for (size_t i = 0; i < frames.size() && i < kMaxPrintedFrames; ++i) {
        const Frame& f = frames[i];
        std::string where = f.file.empty() ? "" : fmt::format("  {}:{}", f.file, f.line);
        std::string module = f.module_path.empty() ? "" : fmt::format("  [{}]", path_basename(f.module_path));
        out << fmt::format("      {}{}{}\n", f.function, where, module);
    }
    if (frames.size() > kMaxPrintedFrames) out << fmt::format("      ... {} more frames\n", frames.size() - kMaxPrintedFrames);
}

std::string short_location(const GroupReport& g) {
    if (g.frames.empty()) return "?";
    const Frame& f = g.frames.front();
    return f.file.empty() ? f.function : fmt::format("{} ({}:{})", f.function, path_basename(f.file), f.line);
}

void write_not_findings(const AnalysisResult& r, std::ostream& out) {
    size_t bounded = 0;
    uint64_t bounded_bytes = 0;
    const GroupReport* largest = nullptr;
    for (const auto& g : r.groups) {
        if (g.verdict.cls != GrowthClass::Bounded) continue;
        ++bounded;
        bounded_bytes += g.retained_bytes;
        if (!largest || g.retained_bytes > largest->retained_bytes) largest = &g;
    }
    if (!largest) return;
    out << fmt::format("not findings: {} bounded group{} hold{} {}, largest: {} {}, plateaued at {:.1f} s\n", bounded,
                       bounded == 1 ? "" : "s", bounded == 1 ? "s" : "", human_bytes(bounded_bytes),
                       human_bytes(largest->retained_bytes), short_location(*largest), largest->verdict.plateau_at_s);
}

}  // namespace

void write_text_report(const AnalysisResult& r, std::ostream& out) {
    for (const auto& w : r.warnings) out << "warning: " << w << '\n';
    if (r.findings.empty()) {
        out << fmt::format("no unbounded growth found in {} (pid {}, {:.1f} s, {} allocations)\n", r.command, r.pid,
                           r.duration_s, r.totals.allocations);
    } else {
        out << fmt::format("{} unbounded growth finding{} in {} (pid {}, {:.1f} s)\n", r.findings.size(),
                           r.findings.size() == 1 ? "" : "s", r.command, r.pid, r.duration_s);
    }
    for (size_t i = 0; i < r.findings.size(); ++i) {
        const GroupReport& g = r.findings[i];
        out << fmt::format("\n#{} {} retained, +{}/s since {:.1f} s, {} live allocations, confidence {:.2f}\n", i + 1,
                           human_bytes(g.retained_bytes), human_bytes(g.verdict.slope_bytes_per_s), g.verdict.started_at_s,
                           g.live_allocations, g.verdict.confidence);
        write_frames(g.frames, out);
    }
    out << '\n';
    write_not_findings(r, out);
    out << fmt::format("traced heap: peak {}, {} retained at the end in {} live allocations; {} allocations, {} frees\n",
                       human_bytes(r.totals.peak_bytes), human_bytes(r.totals.retained_bytes), r.totals.live_allocations,
                       r.totals.allocations, r.totals.frees);
}

}  // namespace growtrace
