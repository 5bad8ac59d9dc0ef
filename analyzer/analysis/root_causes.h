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

#include "analyzer/analysis/analysis_result.h"
#include "analyzer/analysis/root_cause.h"
#include "analyzer/model/symbolizer.h"

namespace growtrace {

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
