// What a root cause is: one finding as the root and the others that are its evidence, each with
// the reason it is evidence (root_causes.h finds them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace growtrace {

// Which list of AnalysisResult a finding is in, and where.
// Container (a growing dict, list, set or deque the CPython agent's walks named) comes last in
// the JSON "findings", after the stacks, so that the other kinds keep their ids.
enum class FindingKind { Cache, Types, Stack, Container };
struct FindingRef {
    FindingKind kind = FindingKind::Stack;
    size_t index = 0;
    bool operator==(const FindingRef&) const = default;
};

// Why a finding is evidence of its root cause (JSON names in relation_name()).
enum class Relation {
    KeyClass,      // classes of this name are what the cache's keys keep missing on
    HoldsEntries,  // the stack's live memory was computed for the cache's missed entries
    SameCall,      // made in the same call that fills the cache or creates the root's classes
    SameLibraryCall,  // allocated inside the same native library, under the same call of the program
    // Its live memory rises in step with the root's entries, and it was allocated under the very
    // line of the program's own code that fills the root (the objects each new entry brings).
    GrowsWithEntries,
};

struct RootCauseMember {
    FindingRef finding;
    Relation relation = Relation::SameCall;
};

struct RootCause {
    FindingRef root;
    std::string title;    // one plain sentence naming what grows
    std::string summary;  // its figures in a line
    std::string remedy;   // what to do, derived from the evidence
    uint64_t retained_bytes = 0;    // the root's memory plus what its evidence adds to it
    double growth_bytes_per_s = 0;  // likewise
    std::vector<RootCauseMember> members;
};

}  // namespace growtrace
