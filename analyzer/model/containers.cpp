#include "analyzer/model/containers.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analyzer/model/frame_folding.h"

namespace growtrace {
namespace {

// A container's series keeps about this many points: past twice as many, every other one goes.
constexpr size_t kMaxContainerPoints = 2048;
constexpr size_t kMaxTypeNames = 4;
constexpr size_t kMaxStacks = 8;
constexpr double kMaxContainerFall = 0.1;

template <typename Key>
std::vector<Key> most_frequent_first(const std::unordered_map<Key, uint64_t>& counts, size_t limit) {
    std::vector<std::pair<Key, uint64_t>> v(counts.begin(), counts.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second || (a.second == b.second && a.first < b.first); });
    std::vector<Key> out;
    for (const auto& [key, count] : v) {
        if (out.size() == limit) break;
        out.push_back(key);
    }
    return out;
}

// A container's size between two walks is not known: it is taken as moving in a straight line
// from one to the next (a cache's exact series is a step function instead).
double interpolated(const std::vector<Step>& steps, double t) {
    if (t <= steps.front().t) return steps.front().value;
    for (size_t i = 1; i < steps.size(); ++i) {
        if (t > steps[i].t) continue;
        const Step& a = steps[i - 1];
        const Step& b = steps[i];
        return b.t > a.t ? a.value + (b.value - a.value) * (t - a.t) / (b.t - a.t) : b.value;
    }
    return steps.back().value;
}

// In how many quarters of [begin, end] the interpolated size rose.
int growing_quarters(const std::vector<Step>& steps, double begin, double end) {
    int growing = 0;
    double previous = interpolated(steps, begin);
    for (int q = 1; q <= 4; ++q) {
        const double v = interpolated(steps, begin + (end - begin) * q / 4);
        growing += v > previous;
        previous = v;
    }
    return growing;
}

}  // namespace

const char* container_kind_name(uint64_t kind) {
    switch (kind) {
        case ContainerRecord::Dict: return "dict";
        case ContainerRecord::List: return "list";
        case ContainerRecord::Set: return "set";
        case ContainerRecord::Deque: return "deque";
        case ContainerRecord::WeakValueDict: return "WeakValueDictionary";
        case ContainerRecord::WeakKeyDict: return "WeakKeyDictionary";
        case ContainerRecord::WeakSet: return "WeakSet";
    }
    return "container";
}

bool filled_by_imports(const std::vector<Frame>& inserted_from) {
    return std::any_of(inserted_from.begin(), inserted_from.end(),
                       [](const Frame& f) { return is_python_frame(f) && f.file.starts_with("<frozen importlib"); });
}

void ContainerTracker::on_container(const ContainerRecord& r, uint64_t table_stack,
                                    const std::vector<uint64_t>& entry_stacks) {
    State& s = containers_[r.container_id];
    s.latest = r;
    s.samples.emplace_back(r.ticks, r.entries);
    if (s.samples.size() > 2 * kMaxContainerPoints) {
        size_t out = 0;
        for (size_t i = 0; i < s.samples.size(); i += 2) s.samples[out++] = s.samples[i];
        s.samples.resize(out);
    }
    for (const std::string& t : r.key_types) ++s.key_types[t];
    for (const std::string& t : r.value_types) ++s.value_types[t];
    if (table_stack) ++s.insert_stacks[table_stack];
    for (uint64_t stack : entry_stacks)
        if (stack) ++s.entry_stacks[stack];
}

std::vector<ContainerFinding> ContainerTracker::finish(const std::function<double(uint64_t)>& seconds,
                                                       uint64_t exit_ticks,
                                                       const std::function<double(double)>& work_at) const {
    std::vector<ContainerFinding> out;
    for (const auto& [id, s] : containers_) {
        std::vector<Step> steps;
        for (const auto& [ticks, entries] : s.samples)
            if (!exit_ticks || ticks <= exit_ticks) steps.push_back({seconds(ticks), static_cast<double>(entries)});
        if (steps.empty()) continue;
        std::stable_sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.t < b.t; });
        ContainerFinding f;
        f.container_id = id;
        f.name = s.latest.name;
        f.owner_type = s.latest.owner_type;
        f.kind = container_kind_name(s.latest.kind);
        f.reached_from_module = !f.name.starts_with("<");
        f.walks = steps.size();
        f.entries_first = static_cast<uint64_t>(steps.front().value);
        f.entries_last = static_cast<uint64_t>(steps.back().value);
        for (const Step& p : steps) f.entries_over_time.push_back({p.t, p.value});
        f.key_types = most_frequent_first(s.key_types, kMaxTypeNames);
        f.value_types = most_frequent_first(s.value_types, kMaxTypeNames);
        f.insert_stacks = most_frequent_first(s.insert_stacks, kMaxStacks);
        f.entry_stacks = most_frequent_first(s.entry_stacks, 4 * kMaxStacks);
        const double begin = steps.front().t, end = steps.back().t;
        const double span = std::max(end - begin, 1e-6);
        f.started_at_s = begin;
        GrowthShape shape;
        shape.growing_quarters = growing_quarters(on_work_axis(steps, work_at), work_at(begin), work_at(end));
        shape.growth = steps.back().value - steps.front().value;
        // Entries that come and go fall back between walks; a growing container never does
        // (beyond a few removals: a tenth of what it held).
        double high = steps.front().value, deepest_fall = 0;
        for (const Step& p : steps) {
            high = std::max(high, p.value);
            if (high > 0) deepest_fall = std::max(deepest_fall, (high - p.value) / high);
        }
        f.growth_entries_per_s = shape.growth / span;
        if (steps.size() < 4) {
            f.reason = fmt::format("measured by {} walk{} only", steps.size(), steps.size() == 1 ? "" : "s");
        } else if (shape.growth < static_cast<double>(kMinContainerGrowthEntries)) {
            f.reason = fmt::format("grew by {} entries only ({} -> {})", static_cast<int64_t>(shape.growth),
                                   f.entries_first, f.entries_last);
        } else if (shape.growing_quarters < kMinGrowingQuarters) {
            f.reason = fmt::format("filled and then stopped growing (growth in {} of 4 quarters of the run)",
                                   shape.growing_quarters);
        } else if (deepest_fall > kMaxContainerFall) {
            f.reason = fmt::format("entries come and go: it fell back by {:.0f} % of its entries between walks",
                                   100 * deepest_fall);
        } else {
            f.unbounded = true;
            f.reason = fmt::format("entries keep rising through the run (growth in {} of 4 quarters, never falling back)",
                                   shape.growing_quarters);
            f.confidence = std::min(1.0, 0.25 * shape.growing_quarters) *
                           std::min(1.0, shape.growth / (4.0 * kMinContainerGrowthEntries));
        }
        out.push_back(std::move(f));
    }
    std::sort(out.begin(), out.end(), [](const ContainerFinding& a, const ContainerFinding& b) {
        if (a.unbounded != b.unbounded) return a.unbounded;
        // One a person can name by a path leads: it becomes the root of what grows with it.
        if (a.reached_from_module != b.reached_from_module) return a.reached_from_module;
        if (a.entries_last != b.entries_last) return a.entries_last > b.entries_last;
        return a.name < b.name;
    });
    return out;
}

}  // namespace growtrace
