#include "analyzer/report/report_text.h"

#include <cmath>

#include <fmt/format.h>

namespace growtrace {


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

namespace {

// A growing cache drags many stacks along with it; the largest few say enough in text.
constexpr size_t kMaxPrintedStackFindings = 5;

// "12.3 MB" exact; "12.3 MB ± 1.1 MB (121 samples)" in a sampled trace.
std::string bytes_figure(double bytes, double stderr_bytes, uint64_t samples, bool sampled) {
    if (!sampled) return human_bytes(bytes);
    return fmt::format("{} ± {} ({} sample{})", human_bytes(bytes), human_bytes(stderr_bytes), samples,
                       samples == 1 ? "" : "s");
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
    if (largest)
        out << fmt::format("not findings: {} bounded group{} hold{} {}, largest: {} {}, plateaued at {:.1f} s\n",
                           bounded, bounded == 1 ? "" : "s", bounded == 1 ? "s" : "", human_bytes(bounded_bytes),
                           human_bytes(largest->retained_bytes), short_location(*largest), largest->verdict.plateau_at_s);
    // Growing without bound, too slowly and too small a part of the heap's growth to act on.
    size_t minor = 0;
    uint64_t minor_bytes = 0;
    const GroupReport* largest_minor = nullptr;
    for (const auto& g : r.groups) {
        if (g.verdict.cls != GrowthClass::Unbounded) continue;
        ++minor;
        minor_bytes += g.retained_bytes;
        if (!largest_minor || g.retained_bytes > largest_minor->retained_bytes) largest_minor = &g;
    }
    if (largest_minor)
        out << fmt::format("minor growth: {} group{} grow{} slowly, holding {}, largest: {} {}, {}\n", minor,
                           minor == 1 ? "" : "s", minor == 1 ? "s" : "", human_bytes(minor_bytes),
                           human_bytes(largest_minor->retained_bytes), short_location(*largest_minor),
                           largest_minor->significance.reason);
    // Sampled traces: groups with too few samples are not guessed at; say how many and how much.
    size_t thin = 0;
    uint64_t thin_bytes = 0;
    for (const auto& g : r.groups) {
        if (g.verdict.cls != GrowthClass::Undetermined) continue;
        ++thin;
        thin_bytes += g.retained_bytes;
    }
    if (thin)
        out << fmt::format("not judged: {} group{} too thinly sampled to judge hold{} about {} (fewer than {} samples, "
                           "or {} live ones, each); --json lists them\n",
                           thin, thin == 1 ? "" : "s", thin == 1 ? "s" : "", human_bytes(thin_bytes), kMinSamplesToJudge,
                           kMinLiveSamplesToJudge);
}

// A growing cache, said the way a person hunting it needs it: which cache, where it is made,
// where it is filled from, how fast, what keeps missing, how much it holds.
void write_cache_finding(size_t number, const CacheReport& c, bool sampled, std::ostream& out) {
    const CacheFinding& f = c.cache;
    out << fmt::format("\n#{} cache {} keeps growing: {} -> {} entries (+{:.1f}/s since {:.1f} s), holding {} in {}{} allocations\n",
                       number, f.name, f.entries_first, f.teardown_at_s > 0 ? f.entries_before_teardown : f.entries_last,
                       f.growth_entries_per_s, f.started_at_s,
                       bytes_figure(static_cast<double>(f.retained_bytes), f.retained_bytes_stderr, f.retained_samples, sampled),
                       sampled ? "about " : "", f.live_allocations);
    out << fmt::format("    functools.lru_cache(maxsize={}) of {}, created at {}\n",
                       f.maxsize < 0 ? std::string("None") : std::to_string(f.maxsize), f.wrapped,
                       f.location.empty() ? "?" : f.location);
    if (f.bound_names.size() > 1) out << fmt::format("    also bound as {}\n", fmt::join(f.bound_names.begin() + 1, f.bound_names.end(), ", "));
    for (const CacheKeyType& k : f.key_types) {
        if (k.distinct_classes < 2) continue;
        out << fmt::format("    keys keep missing on new classes named {}: {} distinct classes, {} still alive\n", k.name,
                           k.distinct_classes, k.live_classes);
    }
    if (!f.example_keys.empty()) out << fmt::format("    e.g. key {}\n", f.example_keys.front());
    if (f.teardown_at_s > 0)
        out << fmt::format("    released at teardown: emptied at {:.1f} s ({} entries, {}); judged on the run before\n",
                           f.teardown_at_s, f.entries_before_teardown,
                           human_bytes(static_cast<double>(f.released_at_teardown_bytes)));
    out << fmt::format("    {} insertions, confidence {:.2f}; filled from:\n", f.insertions, f.confidence);
    write_frames(c.inserted_from, out);
}

// A growing container, said like a cache: which one, who owns it, where it is filled, what
// its newest entries are, how much their stacks hold.
void write_container_finding(size_t number, const ContainerReport& c, std::ostream& out) {
    const ContainerFinding& f = c.container;
    out << fmt::format("\n#{} {} {} keeps growing: {} -> {} entries (+{:.1f}/s since {:.1f} s), its entries' stacks holding {}\n",
                       number, f.kind, f.name, f.entries_first, f.entries_last, f.growth_entries_per_s, f.started_at_s,
                       human_bytes(static_cast<double>(f.retained_bytes)));
    if (!f.owner_type.empty()) out << fmt::format("    owned by {}\n", f.owner_type);
    if (!f.key_types.empty() || !f.value_types.empty())
        out << fmt::format("    newest entries: keys {}, values {}\n", f.key_types.empty() ? "-" : fmt::format("{}", fmt::join(f.key_types, " | ")),
                           f.value_types.empty() ? "-" : fmt::format("{}", fmt::join(f.value_types, " | ")));
    out << fmt::format("    measured by {} walks, confidence {:.2f}; filled from:\n", f.walks, f.confidence);
    if (c.inserted_from.empty()) out << "        (unknown: its slots' block was not traced)\n";
    write_frames(c.inserted_from, out);
}

void write_type_finding(size_t number, const TypeReport& t, std::ostream& out) {
    const TypeFinding& f = t.type;
    out << fmt::format("\n#{} class {} is created again and again: {} created, {} alive ({:.1f}/s since {:.1f} s), confidence {:.2f}; created from:\n",
                       number, f.name, f.created, f.live_at_end, f.created_per_s, f.started_at_s, f.confidence);
    write_frames(t.created_from, out);
}

void write_stack_finding(size_t number, const GroupReport& g, bool sampled, std::ostream& out) {
    out << fmt::format("\n#{} {} retained, +{}/s (+{} per 1,000 allocations) since {:.1f} s, {}{} live allocations, "
                       "confidence {:.2f}\n",
                       number,
                       bytes_figure(static_cast<double>(g.retained_bytes), g.retained_bytes_stderr, g.live_samples, sampled),
                       human_bytes(g.verdict.slope_bytes_per_s), human_bytes(g.verdict.bytes_per_1k_allocations),
                       g.verdict.started_at_s, sampled ? "about " : "", g.live_allocations, g.verdict.confidence);
    out << fmt::format("    {}\n", g.significance.reason);
    if (g.verdict.teardown_at_s > 0)
        out << fmt::format("    released at teardown: {} freed at {:.1f} s, at the end of the work; judged on the run before\n",
                           human_bytes(g.verdict.released_at_teardown), g.verdict.teardown_at_s);
    write_frames(g.frames, out);
}

const char* relation_label(Relation relation) {
    switch (relation) {
        case Relation::HoldsEntries: return "its entries' memory";
        case Relation::SameLibraryCall: return "other paths inside the library";
        case Relation::GrowsWithEntries: return "growing in step with its entries, under the line that fills it";
        default: return "made in the same call";
    }
}

// The evidence folded under a root cause, a line per kind of relation: the classes one by one
// (there are few), the stacks counted, with their memory.
void write_evidence(const RootCause& root, const AnalysisResult& r, std::ostream& out) {
    for (const RootCauseMember& m : root.members) {
        if (m.finding.kind != FindingKind::Types) continue;
        const TypeFinding& t = r.type_findings[m.finding.index].type;
        out << fmt::format("    evidence ({}): classes named {} are created again and again: {} created, {} alive\n",
                           m.relation == Relation::KeyClass ? "the keys' classes" : "made in the same call", t.name,
                           t.created, t.live_at_end);
    }
    for (const RootCauseMember& m : root.members) {
        if (m.finding.kind != FindingKind::Container) continue;
        const ContainerFinding& c = r.container_findings[m.finding.index].container;
        out << fmt::format("    evidence (filled in the same call): {} {} grows with it: {} -> {} entries\n", c.kind, c.name,
                           c.entries_first, c.entries_last);
    }
    for (Relation relation :
         {Relation::HoldsEntries, Relation::GrowsWithEntries, Relation::SameCall, Relation::SameLibraryCall}) {
        size_t count = 0;
        uint64_t bytes = 0;
        const GroupReport* largest = nullptr;
        for (const RootCauseMember& m : root.members) {
            if (m.finding.kind != FindingKind::Stack || m.relation != relation) continue;
            const GroupReport& g = r.findings[m.finding.index];
            ++count;
            bytes += g.retained_bytes;
            if (!largest || g.retained_bytes > largest->retained_bytes) largest = &g;
        }
        if (!count) continue;
        const std::string largest_at =
            count == 1 ? fmt::format("allocated in {}", stack_place(largest->frames))
                       : fmt::format("the largest {} allocated in {}", human_bytes(static_cast<double>(largest->retained_bytes)),
                                     stack_place(largest->frames));
        out << fmt::format("    evidence ({}): {} growing stack{} hold{} {}, {}\n",
                           relation_label(relation), count,
                           count == 1 ? "" : "s", count == 1 ? "s" : "", human_bytes(static_cast<double>(bytes)), largest_at);
    }
}

void write_root_cause(size_t number, const RootCause& root, const AnalysisResult& r, std::ostream& out) {
    const bool sampled = r.sample_period != 0;
    switch (root.root.kind) {
        case FindingKind::Cache: write_cache_finding(number, r.cache_findings[root.root.index], sampled, out); break;
        case FindingKind::Types: write_type_finding(number, r.type_findings[root.root.index], out); break;
        case FindingKind::Stack: write_stack_finding(number, r.findings[root.root.index], sampled, out); break;
        case FindingKind::Container: write_container_finding(number, r.container_findings[root.root.index], out); break;
    }
    out << fmt::format("    remedy: {}\n", root.remedy);
    write_evidence(root, r, out);
}

void write_not_finding_caches(const AnalysisResult& r, std::ostream& out) {
    if (r.caches.empty()) return;
    out << fmt::format("not findings: {} cache{} that stopped growing", r.caches.size(), r.caches.size() == 1 ? "" : "s");
    constexpr size_t kNamed = 3;
    for (size_t i = 0; i < r.caches.size() && i < kNamed; ++i)
        out << fmt::format("{} {} ({})", i ? ";" : ":", r.caches[i].cache.name, r.caches[i].cache.reason);
    if (r.caches.size() > kNamed)
        out << fmt::format("; and {} more (growtrace analyze --json lists them all)", r.caches.size() - kNamed);
    out << '\n';
}

}  // namespace

void write_text_report(const AnalysisResult& r, std::ostream& out) {
    const bool sampled = r.sample_period != 0;
    for (const auto& w : r.warnings) out << "warning: " << w << '\n';
    if (sampled)
        out << fmt::format("sampled trace: one sample per {} allocated on average; sizes and counts of allocations are "
                           "estimates, given ± one standard error (cache entries and classes are exact)\n",
                           human_bytes(static_cast<double>(r.sample_period)));
    const size_t total = finding_count(r);
    const bool unnamed = r.pid == 0 && r.command.empty();
    if (unnamed && total == 0 && r.totals.allocations == 0) {
        out << "nothing to report: the trace names no process and holds no allocation (see the warning above)\n";
        return;
    }
    const std::string who = unnamed ? std::string("an unnamed process") : r.command;
    if (total == 0) {
        out << fmt::format("no unbounded growth found in {} (pid {}, {:.1f} s, {}{:.0f} allocations)\n", who, r.pid,
                           r.duration_s, sampled ? "about " : "", r.totals.allocations);
    } else {
        const size_t roots = r.root_causes.size();
        out << fmt::format("{} root cause{} of unbounded growth in {} (pid {}, {:.1f} s), from {} unbounded growth finding{}{}\n",
                           roots, roots == 1 ? "" : "s", who, r.pid, r.duration_s, total, total == 1 ? "" : "s",
                           roots == 1 ? ": " + r.root_causes.front().title : std::string());
    }
    size_t number = 0, stack_roots = 0;
    for (const RootCause& root : r.root_causes) {
        if (root.root.kind == FindingKind::Stack && stack_roots++ == kMaxPrintedStackFindings) {
            out << fmt::format("\n... and {} more root causes in growing stacks (growtrace analyze --json lists them all)\n",
                               r.root_causes.size() - number);
            break;
        }
        write_root_cause(++number, root, r, out);
    }
    out << '\n';
    write_not_finding_caches(r, out);
    write_not_findings(r, out);
    if (sampled)
        out << fmt::format("traced heap (estimated from {} samples, {} live): peak {}, {} retained at the end in about "
                           "{:.0f} live allocations; about {:.0f} allocations, {:.0f} frees\n",
                           r.totals.samples, r.totals.live_samples, human_bytes(r.totals.peak_bytes),
                           human_bytes(r.totals.retained_bytes), r.totals.live_allocations, r.totals.allocations,
                           r.totals.frees);
    else
        out << fmt::format("traced heap: peak {}, {} retained at the end in {:.0f} live allocations; {:.0f} allocations, "
                           "{:.0f} frees\n",
                           human_bytes(r.totals.peak_bytes), human_bytes(r.totals.retained_bytes), r.totals.live_allocations,
                           r.totals.allocations, r.totals.frees);
}

}  // namespace growtrace
