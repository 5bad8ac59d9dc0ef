#include "analyzer/analysis/root_causes.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "analyzer/model/frame_folding.h"
#include "analyzer/model/units.h"

namespace growtrace {

namespace {

bool same_frame(const Frame& a, const Frame& b) {
    return a.function == b.function && a.file == b.file && a.line == b.line;
}

// Frames every request of a program runs through, which say nothing about what it does: a
// module body, a thread's or a pool worker's start. Two stacks parting inside one of these are
// two pieces of work, not one.
bool is_entry_frame(const Frame& f) {
    return f.function == "<module>" || f.file.ends_with("/threading.py") || f.file.ends_with("/concurrent/futures/thread.py") ||
           f.file.ends_with("/multiprocessing/pool.py") || f.file.ends_with("/socketserver.py");
}

// "C.__new__" and "C.__init__" (3.11+ names frames by qualified name; 3.10 by name only).
bool constructor_halves(const std::string& a, const std::string& b) {
    auto split = [](const std::string& f) {
        const size_t dot = f.rfind('.');
        return dot == std::string::npos ? std::pair{std::string(), f} : std::pair{f.substr(0, dot), f.substr(dot + 1)};
    };
    const auto [owner_a, name_a] = split(a);
    const auto [owner_b, name_b] = split(b);
    return owner_a == owner_b && ((name_a == "__new__" && name_b == "__init__") || (name_a == "__init__" && name_b == "__new__"));
}

std::vector<Frame> python_frames(const std::vector<Frame>& frames) {
    std::vector<Frame> out;
    std::copy_if(frames.begin(), frames.end(), std::back_inserter(out), is_python_frame);
    return out;
}

bool is_runtime_module(const std::string& module_path) {
    const std::string module = path_basename(module_path);
    return module.starts_with("libc.so") || module.starts_with("libstdc++") || module.starts_with("libgrowtrace") ||
           module.starts_with("ld-linux");
}

// Where a stack's memory comes from, for a person: the innermost Python frame, else the
// innermost frame outside the C library and the allocators.
const Frame* program_frame(const std::vector<Frame>& frames) {
    for (const Frame& f : frames)
        if (is_python_frame(f)) return &f;
    for (const Frame& f : frames)
        if (!is_runtime_module(f.module_path) && !f.function.empty() && f.function != "??") return &f;
    return frames.empty() ? nullptr : &frames.front();
}

// A call from the program into a native library that allocated the memory: the program's
// innermost frame (Python, or in the executable), and the outermost frame inside it that is in
// a library other than the C runtime and the interpreter (the function the program called).
struct LibraryCall {
    const Frame* caller = nullptr;
    const Frame* entry = nullptr;
    bool same_as(const LibraryCall& o) const { return same_frame(*caller, *o.caller) && entry->module_path == o.entry->module_path; }
};

std::optional<LibraryCall> library_call(const std::vector<Frame>& frames, const std::string& exe) {
    auto is_program = [&](const Frame& f) { return is_python_frame(f) || (!exe.empty() && f.module_path == exe); };
    auto is_interpreter = [&](const Frame& f) {
        return is_program(f) || f.module_path.empty() || is_runtime_module(f.module_path) ||
               path_basename(f.module_path).starts_with("libpython");
    };
    const auto caller = std::find_if(frames.begin(), frames.end(), is_program);
    if (caller == frames.end()) return std::nullopt;
    // From the caller inwards, past the interpreter's own frames, to the first library frame.
    for (auto it = std::make_reverse_iterator(caller); it != frames.rend(); ++it)
        if (!is_interpreter(*it)) return LibraryCall{&*caller, &*it};
    return std::nullopt;
}

std::string place_of(const Frame* f) {
    if (!f) return "an unknown place";
    if (f->file.empty()) return f->function;
    return fmt::format("{} ({}:{})", f->function, path_basename(f->file), f->line);
}

// The stacks a root cause's work runs through: a finding made in the same call as any of them
// is evidence of it.
struct Anchors {
    std::vector<const std::vector<Frame>*> stacks;
    // A cache's or container's inserting stack and its entries over time (else null).
    const std::vector<Frame>* filled_from = nullptr;
    const std::vector<SeriesPoint>* entries = nullptr;
    bool reaches(const std::vector<Frame>& frames) const {
        return std::any_of(stacks.begin(), stacks.end(), [&](const auto* s) { return in_same_call(*s, frames); });
    }
};

// How many frames two stacks (innermost first) share, read from the outside in.
size_t shared_outer_frames(const std::vector<Frame>& a, const std::vector<Frame>& b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && same_frame(a[a.size() - 1 - n], b[b.size() - 1 - n])) ++n;
    return n;
}

// Frames of the program's own Python code: not the standard library, not an installed package.
bool is_program_code(const Frame& f) {
    return is_python_frame(f) && f.file.find("/site-packages/") == std::string::npos &&
           f.file.find("/dist-packages/") == std::string::npos && f.file.find("/lib/python3.") == std::string::npos;
}

// True when two stacks run through the same Python frames from the outside in down to a frame
// of the program's own code that is real work (no entry point), and part below it: two calls
// made by the same line of the program (`return make(form)().load(data)`).
bool part_below_one_program_line(const std::vector<Frame>& a_frames, const std::vector<Frame>& b_frames) {
    const std::vector<Frame> a = python_frames(a_frames), b = python_frames(b_frames);
    const size_t shared = shared_outer_frames(a, b);
    if (shared == 0) return false;
    const Frame& last_shared = a[a.size() - shared];
    return !is_entry_frame(last_shared) && is_program_code(last_shared);
}

// The group's level at the end of the window holding time t (its series follows the timeline's
// windows).
double level_at(const GroupReport& g, const std::vector<TimelinePoint>& timeline, double t) {
    size_t w = 0;
    while (w + 1 < timeline.size() && w + 1 < g.retained_series.size() && timeline[w].t_s < t) ++w;
    return w < g.retained_series.size() ? static_cast<double>(g.retained_series[w]) : 0;
}

// Whether a group's live bytes rose in step with a count of entries measured at a few moments.
// The measurements are taken as intervals that each add at least 1/kInStepSlices of the entries
// gained (two walks a moment apart say nothing of a pace); over each, the bytes gained per entry
// gained must stay within a factor of kInStepFactor of the whole run's. Fewer than
// kMinInStepIntervals such intervals are no evidence.
constexpr double kInStepFactor = 2.0;
constexpr double kInStepSlices = 8;
constexpr size_t kMinInStepIntervals = 2;
bool grows_in_step(const GroupReport& g, const std::vector<TimelinePoint>& timeline,
                   const std::vector<SeriesPoint>& entries) {
    if (entries.size() < kMinInStepIntervals + 1) return false;
    const double entries_gained = entries.back().value - entries.front().value;
    const double bytes_gained = level_at(g, timeline, entries.back().t_s) - level_at(g, timeline, entries.front().t_s);
    if (entries_gained <= 0 || bytes_gained <= 0) return false;
    const double per_entry = bytes_gained / entries_gained;
    // The measurements that end an interval; a short last one is part of the one before.
    std::vector<size_t> cuts{0};
    for (size_t i = 1; i < entries.size(); ++i)
        if (entries[i].value - entries[cuts.back()].value >= entries_gained / kInStepSlices) cuts.push_back(i);
    if (cuts.back() != entries.size() - 1) {
        if (cuts.size() > 1) cuts.back() = entries.size() - 1;
        else cuts.push_back(entries.size() - 1);
    }
    if (cuts.size() < kMinInStepIntervals + 1) return false;
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
        const SeriesPoint& from = entries[cuts[k]];
        const SeriesPoint& to = entries[cuts[k + 1]];
        const double d_bytes = level_at(g, timeline, to.t_s) - level_at(g, timeline, from.t_s);
        const double ratio = d_bytes / (to.value - from.value) / per_entry;
        if (ratio < 1 / kInStepFactor || ratio > kInStepFactor) return false;
    }
    return true;
}

class TreeBuilder {
public:
    explicit TreeBuilder(const AnalysisResult& r)
        : r_(r),
          type_taken_(r.type_findings.size(), false),
          stack_taken_(r.findings.size(), false),
          container_taken_(r.container_findings.size(), false) {}

    std::vector<RootCause> build() {
        for (size_t i = 0; i < r_.cache_findings.size(); ++i) add_cache_root(i);
        for (size_t i = 0; i < r_.container_findings.size(); ++i)
            if (!container_taken_[i]) add_container_root(i);
        for (size_t i = 0; i < r_.type_findings.size(); ++i)
            if (!type_taken_[i]) add_type_root(i);
        for (size_t i = 0; i < r_.findings.size(); ++i)
            if (!stack_taken_[i]) add_stack_root(i);
        for (RootCause& root : roots_) add_figures(root);
        return std::move(roots_);
    }

private:
    void take(RootCause& root, FindingRef f, Relation relation) {
        (f.kind == FindingKind::Types       ? type_taken_
         : f.kind == FindingKind::Container ? container_taken_
                                            : stack_taken_)[f.index] = true;
        root.members.push_back({f, relation});
    }

    void add_cache_root(size_t index) {
        const CacheReport& c = r_.cache_findings[index];
        RootCause root;
        root.root = {FindingKind::Cache, index};
        Anchors anchors;
        anchors.stacks.push_back(&c.inserted_from);
        for (size_t t = 0; t < r_.type_findings.size(); ++t) {
            if (type_taken_[t] || !is_key_class(c.cache, r_.type_findings[t].type.name)) continue;
            take(root, {FindingKind::Types, t}, Relation::KeyClass);
            anchors.stacks.push_back(&r_.type_findings[t].created_from);
        }
        for (size_t t = 0; t < r_.type_findings.size(); ++t) {
            if (type_taken_[t] || !anchors.reaches(r_.type_findings[t].created_from)) continue;
            take(root, {FindingKind::Types, t}, Relation::SameCall);
            anchors.stacks.push_back(&r_.type_findings[t].created_from);
        }
        for (size_t g = 0; g < r_.findings.size(); ++g)
            if (!stack_taken_[g] && r_.findings[g].explained_by_cache == c.cache.name)
                take(root, {FindingKind::Stack, g}, Relation::HoldsEntries);
        anchors.filled_from = &c.inserted_from;
        anchors.entries = &c.cache.entries_over_time;
        // A container filled in the same call as the cache (a library's registry of the classes
        // its misses make) grows because the cache does.
        for (size_t k = 0; k < r_.container_findings.size(); ++k) {
            const std::vector<Frame>& filled = r_.container_findings[k].inserted_from;
            if (!container_taken_[k] && !filled.empty() && anchors.reaches(filled))
                take(root, {FindingKind::Container, k}, Relation::SameCall);
        }
        push(std::move(root), std::move(anchors));
    }

    // A growing container: the stacks that allocated its newest entries hold its memory; the
    // classes and stacks made in the same call as the insertion that grew its slots are its work.
    void add_container_root(size_t index) {
        const ContainerReport& c = r_.container_findings[index];
        RootCause root;
        root.root = {FindingKind::Container, index};
        Anchors anchors;
        if (!c.inserted_from.empty()) anchors.stacks.push_back(&c.inserted_from);
        container_taken_[index] = true;
        // Other containers filled in the same call grow with it (the interpreter's own list of
        // a base class's subclasses, beside a registry of classes).
        for (size_t k = index + 1; k < r_.container_findings.size(); ++k) {
            const std::vector<Frame>& filled = r_.container_findings[k].inserted_from;
            if (!container_taken_[k] && !filled.empty() && anchors.reaches(filled))
                take(root, {FindingKind::Container, k}, Relation::SameCall);
        }
        const std::vector<uint64_t>& held = c.container.entry_stacks;
        for (size_t g = 0; g < r_.findings.size(); ++g) {
            const std::vector<uint64_t>& ids = r_.findings[g].stack_ids;
            if (!stack_taken_[g] && std::any_of(ids.begin(), ids.end(), [&](uint64_t id) {
                    return std::find(held.begin(), held.end(), id) != held.end();
                }))
                take(root, {FindingKind::Stack, g}, Relation::HoldsEntries);
        }
        anchors.filled_from = &c.inserted_from;
        anchors.entries = &c.container.entries_over_time;
        for (size_t t = 0; t < r_.type_findings.size(); ++t) {
            if (type_taken_[t] || !anchors.reaches(r_.type_findings[t].created_from)) continue;
            take(root, {FindingKind::Types, t}, Relation::SameCall);
            anchors.stacks.push_back(&r_.type_findings[t].created_from);
        }
        push(std::move(root), std::move(anchors));
    }

    void add_type_root(size_t index) {
        RootCause root;
        root.root = {FindingKind::Types, index};
        type_taken_[index] = true;
        Anchors anchors;
        anchors.stacks.push_back(&r_.type_findings[index].created_from);
        for (size_t t = index + 1; t < r_.type_findings.size(); ++t) {
            if (type_taken_[t] || !anchors.reaches(r_.type_findings[t].created_from)) continue;
            take(root, {FindingKind::Types, t}, Relation::SameCall);
            anchors.stacks.push_back(&r_.type_findings[t].created_from);
        }
        push(std::move(root), std::move(anchors));
    }

    // Stacks nothing has claimed yet are offered to the cache and class roots first (in order),
    // so that the class construction a cache's keys drag along is folded under the cache; then
    // to the caches and containers they grow in step with.
    void add_stack_root(size_t index) {
        for (size_t i = 0; i < roots_.size(); ++i) {
            if (roots_[i].root.kind == FindingKind::Stack) break;
            if (anchors_[i].reaches(r_.findings[index].frames)) {
                take(roots_[i], {FindingKind::Stack, index}, Relation::SameCall);
                return;
            }
        }
        // Then to the caches and containers whose entries it grows with, filled by the line of the
        // program it was allocated under: what each new entry brings along.
        for (size_t i = 0; i < roots_.size(); ++i) {
            const Anchors& a = anchors_[i];
            if (a.filled_from && !a.filled_from->empty() && part_below_one_program_line(*a.filled_from, r_.findings[index].frames) &&
                grows_in_step(r_.findings[index], r_.timeline, *a.entries)) {
                take(roots_[i], {FindingKind::Stack, index}, Relation::GrowsWithEntries);
                return;
            }
        }
        // Growth inside one library under one call of the program is one cause, however many
        // internal paths of the library it takes.
        if (const auto call = library_call(r_.findings[index].frames, r_.exe)) {
            for (RootCause& root : roots_) {
                if (root.root.kind != FindingKind::Stack) continue;
                const auto root_call = library_call(r_.findings[root.root.index].frames, r_.exe);
                if (root_call && root_call->same_as(*call)) {
                    take(root, {FindingKind::Stack, index}, Relation::SameLibraryCall);
                    return;
                }
            }
        }
        RootCause root;
        root.root = {FindingKind::Stack, index};
        stack_taken_[index] = true;
        push(std::move(root), Anchors{});
    }

    void push(RootCause root, Anchors anchors) {
        roots_.push_back(std::move(root));
        anchors_.push_back(std::move(anchors));
    }

    static bool is_key_class(const CacheFinding& c, const std::string& name) {
        return std::any_of(c.key_types.begin(), c.key_types.end(),
                           [&](const CacheKeyType& k) { return k.name == name && k.distinct_classes >= 2; });
    }

    void add_figures(RootCause& root) const;

    const AnalysisResult& r_;
    std::vector<bool> type_taken_, stack_taken_, container_taken_;
    std::vector<RootCause> roots_;
    std::vector<Anchors> anchors_;
};

// The memory a root cause holds: its own, plus the stacks folded under it that its own figure
// does not already count (a cache's figure already counts the stacks that hold its entries).
void TreeBuilder::add_figures(RootCause& root) const {
    double bytes = 0, slope = 0;
    switch (root.root.kind) {
        case FindingKind::Cache: {
            const CacheFinding& c = r_.cache_findings[root.root.index].cache;
            bytes = static_cast<double>(c.retained_bytes);
            slope = c.growth_bytes_per_s;
            break;
        }
        case FindingKind::Types: break;
        case FindingKind::Container: {
            const ContainerFinding& c = r_.container_findings[root.root.index].container;
            bytes = static_cast<double>(c.retained_bytes);
            slope = c.growth_bytes_per_s;
            break;
        }
        case FindingKind::Stack: {
            const GroupReport& g = r_.findings[root.root.index];
            bytes = static_cast<double>(g.retained_bytes);
            slope = g.verdict.slope_bytes_per_s;
            break;
        }
    }
    for (const RootCauseMember& m : root.members) {
        if (m.finding.kind != FindingKind::Stack || m.relation == Relation::HoldsEntries) continue;
        const GroupReport& g = r_.findings[m.finding.index];
        bytes += static_cast<double>(g.retained_bytes);
        slope += g.verdict.slope_bytes_per_s;
    }
    root.retained_bytes = static_cast<uint64_t>(std::max(0.0, bytes));
    root.growth_bytes_per_s = slope;
}

const CacheKeyType* repeated_key_class(const CacheFinding& c) {
    const CacheKeyType* best = nullptr;
    for (const CacheKeyType& k : c.key_types)
        if (k.distinct_classes >= 2 && (!best || k.distinct_classes > best->distinct_classes)) best = &k;
    return best;
}

void describe_cache(RootCause& root, const CacheFinding& c) {
    root.title = fmt::format("cache {} keeps growing", c.name);
    root.summary = fmt::format("{} -> {} entries (+{:.1f}/s since {:.1f} s), holding {}", c.entries_first, c.entries_last,
                               c.growth_entries_per_s, c.started_at_s, human_bytes(static_cast<double>(root.retained_bytes)));
    if (const CacheKeyType* k = repeated_key_class(c)) {
        const std::string alive = k->live_classes == k->distinct_classes ? "all alive" : fmt::format("{} alive", k->live_classes);
        root.remedy = fmt::format(
            "the keys are classes re-created with the same name ({}: {} distinct, {}): create the class once and reuse "
            "it, key the cache on a stable identity, or bound the cache with maxsize",
            k->name, k->distinct_classes, alive);
    } else {
        root.remedy = fmt::format(
            "entries are never evicted (maxsize=None) and new keys keep coming ({} insertions): bound the cache with "
            "maxsize, or key it on something that repeats",
            c.insertions);
    }
}

void describe_container(RootCause& root, const ContainerReport& r) {
    const ContainerFinding& c = r.container;
    root.title = fmt::format("{} {} keeps growing", c.kind, c.name);
    root.summary = fmt::format("{} -> {} entries (+{:.1f}/s since {:.1f} s), holding {}", c.entries_first, c.entries_last,
                               c.growth_entries_per_s, c.started_at_s, human_bytes(static_cast<double>(root.retained_bytes)));
    const std::string filled = r.inserted_from.empty() ? std::string("where it is filled")
                                                       : stack_place(r.inserted_from);
    root.remedy = fmt::format(
        "entries are added ({}) and never removed: bound it (evict the oldest, or use an LRU with a maxsize), remove "
        "entries when their work is done, or hold them weakly",
        filled);
}

void describe_types(RootCause& root, const TypeFinding& t) {
    root.title = fmt::format("classes named {} are created again and again", t.name);
    root.summary = fmt::format("{} created, {} alive ({:.1f}/s since {:.1f} s)", t.created, t.live_at_end, t.created_per_s,
                               t.started_at_s);
    root.remedy = fmt::format(
        "each call makes a new class named {} and something keeps them alive: create the class once and reuse it, or "
        "find the container that holds the old ones (their creating stack is below)",
        t.name);
}

void describe_library_growth(RootCause& root, const GroupReport& g, const LibraryCall& call) {
    const std::string library = path_basename(call.entry->module_path);
    const size_t paths = 1 + static_cast<size_t>(std::count_if(root.members.begin(), root.members.end(), [](const RootCauseMember& m) {
                             return m.relation == Relation::SameLibraryCall;
                         }));
    root.title = fmt::format("memory allocated inside {} ({}), called from {}, keeps growing", library, call.entry->function,
                             place_of(call.caller));
    root.summary = fmt::format("{} retained, +{}/s since {:.1f} s, through {} path{} inside {}",
                               human_bytes(static_cast<double>(root.retained_bytes)), human_bytes(root.growth_bytes_per_s),
                               g.verdict.started_at_s, paths, paths == 1 ? "" : "s", library);
    root.remedy = fmt::format(
        "{} keeps what it allocates for each call of {} from {}: release what the library hands back (a handle, a "
        "context, a result to free), see whether it caches or registers per call and how to bound that, or call it less",
        library, call.entry->function, place_of(call.caller));
}

void describe_stack(RootCause& root, const GroupReport& g, const std::string& exe) {
    if (const auto call = library_call(g.frames, exe)) return describe_library_growth(root, g, *call);
    const std::string place = stack_place(g.frames);
    root.title = fmt::format("memory allocated in {} keeps growing", place);
    root.summary = fmt::format("{} retained, +{}/s since {:.1f} s, {} live allocations", human_bytes(static_cast<double>(g.retained_bytes)),
                               human_bytes(g.verdict.slope_bytes_per_s), g.verdict.started_at_s, g.live_allocations);
    root.remedy = fmt::format(
        "what {} allocates is kept and never freed while the work goes on: bound or evict the table, list or cache "
        "that holds it",
        place);
}

void describe(RootCause& root, const AnalysisResult& r) {
    switch (root.root.kind) {
        case FindingKind::Cache: describe_cache(root, r.cache_findings[root.root.index].cache); break;
        case FindingKind::Types: describe_types(root, r.type_findings[root.root.index].type); break;
        case FindingKind::Stack: describe_stack(root, r.findings[root.root.index], r.exe); break;
        case FindingKind::Container: describe_container(root, r.container_findings[root.root.index]); break;
    }
}

}  // namespace

std::string stack_place(const std::vector<Frame>& frames) { return place_of(program_frame(frames)); }

// Only Python frames are compared: native frames around them (a thread's start, which a stack
// may or may not have recorded; the allocator below) say nothing about which call it was.
bool in_same_call(const std::vector<Frame>& a_frames, const std::vector<Frame>& b_frames) {
    const std::vector<Frame> a = python_frames(a_frames), b = python_frames(b_frames);
    const size_t shared = shared_outer_frames(a, b);
    const bool shared_work = std::any_of(a.end() - static_cast<std::ptrdiff_t>(shared), a.end(),
                                         [](const Frame& f) { return !is_entry_frame(f); });
    auto ia = a.rbegin() + static_cast<std::ptrdiff_t>(shared), ib = b.rbegin() + static_cast<std::ptrdiff_t>(shared);
    if (ia == a.rend() || ib == b.rend()) return shared_work;
    // Parted: inside one function (same function, other lines), which must be real work.
    if (ia->function == ib->function && ia->file == ib->file) return !is_entry_frame(*ia);
    // Or into the __new__ and the __init__ of one class, which one construction calls in turn
    // (a metaclass's: a library's registry filled in __init__, the interpreter's list of
    // subclasses in __new__), from a line that is real work.
    return shared_work && ia->file == ib->file && constructor_halves(ia->function, ib->function) &&
           !is_entry_frame(*std::prev(ia));
}

std::vector<RootCause> find_root_causes(const AnalysisResult& r) {
    std::vector<RootCause> roots = TreeBuilder(r).build();
    for (RootCause& root : roots) describe(root, r);
    return roots;
}

size_t finding_id(const AnalysisResult& r, FindingRef f) {
    switch (f.kind) {
        case FindingKind::Cache: return f.index + 1;
        case FindingKind::Types: return r.cache_findings.size() + f.index + 1;
        case FindingKind::Stack: return r.cache_findings.size() + r.type_findings.size() + f.index + 1;
        case FindingKind::Container:
            return r.cache_findings.size() + r.type_findings.size() + r.findings.size() + f.index + 1;
    }
    return 0;
}

const char* relation_name(Relation relation) {
    switch (relation) {
        case Relation::KeyClass: return "key_class";
        case Relation::HoldsEntries: return "holds_entries";
        case Relation::SameCall: return "same_call";
        case Relation::SameLibraryCall: return "same_library_call";
        case Relation::GrowsWithEntries: return "grows_with_entries";
    }
    return "?";
}

const char* finding_kind_name(FindingKind kind) {
    switch (kind) {
        case FindingKind::Cache: return "cache_growth";
        case FindingKind::Types: return "duplicate_types";
        case FindingKind::Stack: return "unbounded_growth";
        case FindingKind::Container: return "container_growth";
    }
    return "?";
}

}  // namespace growtrace
