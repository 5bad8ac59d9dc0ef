// Containers of a CPython program that keep growing: the dicts, lists, sets and deques (and
// weakref dictionaries) the agent's walks measured (Container records, docs/containers.md).
// A container is a finding when its entry count rises through the run and never falls back:
// growth in at least three of the four quarters of the walks' span, and never more than a tenth
// of its entries gone between walks. One that fills and then keeps its size (a bounded dict
// evicting its oldest key), or whose entries come and go (a list cleared now and then), is not.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/model/python_caches.h"
#include "analyzer/read/python_records.h"
#include "analyzer/model/symbolizer.h"

namespace growtrace {

struct ContainerFinding {
    uint64_t container_id = 0;
    std::string name;        // the path that reaches it, or "<module.Type instance>.attr"
    std::string owner_type;  // module.qualname of the object (or module) holding it
    std::string kind;        // dict, list, set, deque, WeakValueDictionary, ...
    bool reached_from_module = false;  // named by a module path (not found by the heap pass)
    uint64_t walks = 0;                // walks that measured it
    uint64_t entries_first = 0;
    uint64_t entries_last = 0;
    double growth_entries_per_s = 0;
    double started_at_s = 0;
    std::vector<SeriesPoint> entries_over_time;
    // Type names of its newest entries over the walks, most frequent first.
    std::vector<std::string> key_types, value_types;
    // Stacks that allocated its slots' block (reallocated by the insertion that outgrew it),
    // most frequent first: where it is filled.
    std::vector<uint64_t> insert_stacks;
    // Stacks that allocated its newest entries' objects: what holds its memory.
    std::vector<uint64_t> entry_stacks;
    // Live bytes at the end of the stacks that allocated its entries (filled in by the analysis).
    uint64_t retained_bytes = 0;
    double growth_bytes_per_s = 0;
    double confidence = 0;
    bool unbounded = false;
    std::string reason;
};

class ContainerTracker {
public:
    // table_stack / entry_stacks: the stacks of the record's allocations, 0 where unknown.
    void on_container(const ContainerRecord& r, uint64_t table_stack, const std::vector<uint64_t>& entry_stacks);
    bool empty() const { return containers_.empty(); }
    // exit_ticks: the shutdown mark (0 none); walks after it decide nothing. `work_at` maps a
    // time in seconds to the program's work done by then (work_axis.h; none: the clock): the
    // quarters of growth are quarters of the work, so a program stalled between two walks
    // (a busy machine) does not look like a container that stopped growing.
    std::vector<ContainerFinding> finish(const std::function<double(uint64_t)>& seconds, uint64_t exit_ticks,
                                         const std::function<double(double)>& work_at = [](double s) { return s; }) const;

private:
    struct State {
        ContainerRecord latest;
        std::vector<std::pair<uint64_t, uint64_t>> samples;  // ticks, entries
        std::unordered_map<std::string, uint64_t> key_types, value_types;
        std::unordered_map<uint64_t, uint64_t> insert_stacks, entry_stacks;
    };
    std::unordered_map<uint64_t, State> containers_;
};

// Below this growth over the run a container is never a finding.
inline constexpr uint64_t kMinContainerGrowthEntries = 50;

const char* container_kind_name(uint64_t kind);

// Is a container's inserting stack an import's: does it run through the import system
// (importlib's frozen bootstrap)? sys.modules, the interpreter's dict of a base class's
// subclasses and a module's tables grow while a program imports lazily in its first requests:
// start-up, not a cache, and not a finding. (A script's own body is run without importlib.)
bool filled_by_imports(const std::vector<Frame>& inserted_from);

}  // namespace growtrace
