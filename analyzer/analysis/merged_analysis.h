// Findings of several processes put together (docs/merged-analysis.md): the same finding in
// processes of the same program (a pool's workers, a parent and the children it forked) is one
// merged finding that says in how many of them it is found and with what figures in each.
// Processes of different programs are never merged, whatever their stacks.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis.h"
#include "analyzer/analysis/trace_set.h"

namespace growtrace {

// A process's program: its executable and arguments, every run of digits written as "N", so
// that the workers of one pool (whose command lines differ at most in descriptor numbers, ports
// or ids) are one program and a script is not mixed up with another one run by the same
// interpreter. A forked child keeps its parent's command line, so it is its parent's program.
std::string program_key(const AnalysisResult& r);

// One finding of one process (FindingKind: root_causes.h): result.cache_findings, type_findings, findings or
// container_findings [index].
struct ProcessFindingRef {
    size_t trace = 0;  // index in the trace set
    FindingKind kind = FindingKind::Stack;
    size_t index = 0;
};

// The figures a finding gives for its process.
struct FindingFigures {
    double retained_bytes = 0;
    double growth_bytes_per_s = 0;
    double live_allocations = 0;
    double started_at_s = 0;
    double confidence = 0;
};
FindingFigures figures_of(const std::vector<AnalysedTrace>& traces, const ProcessFindingRef& ref);

struct ProgramGroup {
    std::string key;         // program_key()
    std::string command;     // the first process's command line, for people
    std::vector<size_t> traces;  // its processes, in set order
};

struct MergedFinding {
    FindingKind kind = FindingKind::Stack;
    size_t program = 0;          // index in MergedAnalysis::programs
    std::vector<ProcessFindingRef> in;  // the processes where it is a finding, most retained first
    FindingFigures total;        // sums (started_at_s: the earliest; confidence: the highest)
    double min_retained = 0, max_retained = 0;
    // Stacks only: in every process this stack's memory is a growing cache's entries.
    std::string explained_by_cache;
};

struct MergedAnalysis {
    std::vector<ProgramGroup> programs;
    std::vector<MergedFinding> findings;  // caches, classes, stacks, then containers; each most retained first
};

MergedAnalysis merge_findings(const std::vector<AnalysedTrace>& traces);

}  // namespace growtrace
