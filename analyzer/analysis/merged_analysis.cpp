#include "analyzer/analysis/merged_analysis.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace growtrace {

namespace {

std::string mask_digits(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (std::isdigit(static_cast<unsigned char>(s[i]))) {
            out += 'N';
            while (i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) ++i;
        } else {
            out += s[i];
        }
    }
    return out;
}

// Frames compared across processes: addresses differ (ASLR), names, lines and modules do not.
std::string frames_identity(const std::vector<Frame>& frames) {
    std::string key;
    for (const Frame& f : frames)
        key += fmt::format("{}\x1f{}\x1f{}\x1f{}\x1e", f.function, f.file, f.line, path_basename(f.module_path));
    return key;
}

std::string finding_identity(const AnalysisResult& r, FindingKind kind, size_t index) {
    switch (kind) {
        case FindingKind::Cache:
            return "cache\x1d" + r.cache_findings[index].cache.name + "\x1d" + r.cache_findings[index].cache.location;
        case FindingKind::Types: return "type\x1d" + r.type_findings[index].type.name;
        case FindingKind::Stack: return "stack\x1d" + frames_identity(r.findings[index].frames);
        case FindingKind::Container: return "container\x1d" + r.container_findings[index].container.name;
    }
    return {};
}

}  // namespace

std::string program_key(const AnalysisResult& r) {
    std::string key = r.exe;
    for (size_t i = 1; i < r.argv.size(); ++i) key += "\x1f" + mask_digits(r.argv[i]);
    if (r.exe.empty() && r.argv.empty()) key = mask_digits(r.command);
    return key;
}

FindingFigures figures_of(const std::vector<AnalysedTrace>& traces, const ProcessFindingRef& ref) {
    const AnalysisResult& r = traces[ref.trace].result;
    FindingFigures f;
    switch (ref.kind) {
        case FindingKind::Cache: {
            const CacheFinding& c = r.cache_findings[ref.index].cache;
            f = {static_cast<double>(c.retained_bytes), c.growth_bytes_per_s, static_cast<double>(c.live_allocations),
                 c.started_at_s, c.confidence};
            break;
        }
        case FindingKind::Types: {
            const TypeFinding& t = r.type_findings[ref.index].type;
            f = {0, 0, static_cast<double>(t.live_at_end), t.started_at_s, t.confidence};
            break;
        }
        case FindingKind::Stack: {
            const GroupReport& g = r.findings[ref.index];
            f = {static_cast<double>(g.retained_bytes), g.verdict.slope_bytes_per_s,
                 static_cast<double>(g.live_allocations), g.verdict.started_at_s, g.verdict.confidence};
            break;
        }
        case FindingKind::Container: {
            const ContainerFinding& c = r.container_findings[ref.index].container;
            f = {static_cast<double>(c.retained_bytes), c.growth_bytes_per_s, static_cast<double>(c.entries_last),
                 c.started_at_s, c.confidence};
            break;
        }
    }
    return f;
}

MergedAnalysis merge_findings(const std::vector<AnalysedTrace>& traces) {
    MergedAnalysis out;
    std::map<std::string, size_t> program_index;
    std::vector<size_t> program_of(traces.size());
    for (size_t i = 0; i < traces.size(); ++i) {
        const AnalysisResult& r = traces[i].result;
        auto [it, inserted] = program_index.try_emplace(program_key(r), out.programs.size());
        if (inserted) out.programs.push_back(ProgramGroup{it->first, r.command, {}});
        out.programs[it->second].traces.push_back(i);
        program_of[i] = it->second;
    }

    // (program, identity) -> merged finding, in order of first appearance.
    std::map<std::pair<size_t, std::string>, size_t> index;
    for (size_t i = 0; i < traces.size(); ++i) {
        const AnalysisResult& r = traces[i].result;
        auto add = [&](FindingKind kind, size_t n) {
            for (size_t k = 0; k < n; ++k) {
                auto [it, inserted] =
                    index.try_emplace({program_of[i], finding_identity(r, kind, k)}, out.findings.size());
                if (inserted) {
                    MergedFinding m;
                    m.kind = kind;
                    m.program = program_of[i];
                    out.findings.push_back(std::move(m));
                }
                out.findings[it->second].in.push_back(ProcessFindingRef{i, kind, k});
            }
        };
        add(FindingKind::Cache, r.cache_findings.size());
        add(FindingKind::Types, r.type_findings.size());
        add(FindingKind::Stack, r.findings.size());
        add(FindingKind::Container, r.container_findings.size());
    }

    for (MergedFinding& m : out.findings) {
        std::stable_sort(m.in.begin(), m.in.end(), [&](const ProcessFindingRef& a, const ProcessFindingRef& b) {
            return figures_of(traces, a).retained_bytes > figures_of(traces, b).retained_bytes;
        });
        bool first = true;
        bool all_explained = m.kind == FindingKind::Stack;
        std::string cache;
        for (const ProcessFindingRef& ref : m.in) {
            const FindingFigures f = figures_of(traces, ref);
            m.total.retained_bytes += f.retained_bytes;
            m.total.growth_bytes_per_s += f.growth_bytes_per_s;
            m.total.live_allocations += f.live_allocations;
            m.total.started_at_s = first ? f.started_at_s : std::min(m.total.started_at_s, f.started_at_s);
            m.total.confidence = std::max(m.total.confidence, f.confidence);
            m.min_retained = first ? f.retained_bytes : std::min(m.min_retained, f.retained_bytes);
            m.max_retained = std::max(m.max_retained, f.retained_bytes);
            first = false;
            if (m.kind == FindingKind::Stack) {
                const std::string& by = traces[ref.trace].result.findings[ref.index].explained_by_cache;
                if (by.empty() || (!cache.empty() && by != cache)) all_explained = false;
                cache = by;
            }
        }
        if (all_explained) m.explained_by_cache = cache;
    }
    // Containers after the stacks, as in one trace's findings (report_json.cpp).
    auto rank = [](FindingKind k) {
        switch (k) {
            case FindingKind::Cache: return 0;
            case FindingKind::Types: return 1;
            case FindingKind::Stack: return 2;
            case FindingKind::Container: return 3;
        }
        return 2;
    };
    std::stable_sort(out.findings.begin(), out.findings.end(), [&](const MergedFinding& a, const MergedFinding& b) {
        return std::make_tuple(rank(a.kind), -a.total.retained_bytes, -static_cast<double>(a.in.size())) <
               std::make_tuple(rank(b.kind), -b.total.retained_bytes, -static_cast<double>(b.in.size()));
    });
    return out;
}

}  // namespace growtrace
