// Root causes: the findings of one analysis arranged as a tree, so that one cause reads as one
// finding. A growing cache is a root; the classes its keys keep missing on, the stacks that
// hold its entries' memory and the classes and stacks made in the same call that fills it are
// its evidence. A growing class name that no cache explains is a root with the stacks made in
// the same call as its classes. Growing stacks inside one native library under one call of the
// program are one root. A growing stack that nothing explains is its own root.
// docs/growth-classifier.md ("Root causes") gives the rules and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/symbolizer.h"

namespace growtrace {

struct AnalysisResult;

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

// Largest first within each kind: caches, then containers, then class names, then stacks.
std::vector<RootCause> find_root_causes(const AnalysisResult& r);

// The finding's id in the JSON report: its 1-based position in "findings" (caches, then class
// names, then stacks, then containers).
size_t finding_id(const AnalysisResult& r, FindingRef f);

const char* relation_name(Relation relation);
const char* finding_kind_name(FindingKind kind);

// Where a stack's memory comes from, for a person: "function (file:line)" of its innermost
// Python frame, else of its innermost frame outside the C library and the allocators.
std::string stack_place(const std::vector<Frame>& frames);

// True when two stacks (innermost first) are the work of one call: read from the outside in
// they run through the same frames and then part inside one Python function that is not an
// entry point (a module body, a thread's start), or one holds the other whole.
bool in_same_call(const std::vector<Frame>& a, const std::vector<Frame>& b);

}  // namespace growtrace
