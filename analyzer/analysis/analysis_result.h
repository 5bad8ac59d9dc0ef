// What the analysis of one trace finds: plain data that the reports (analyzer/report/) render
// and the analysis of several traces merges. analysis.h makes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/analysis/root_cause.h"
#include "analyzer/model/containers.h"
#include "analyzer/model/growth_classifier.h"
#include "analyzer/model/ledger.h"
#include "analyzer/model/python_caches.h"
#include "analyzer/model/retention.h"
#include "analyzer/model/symbolizer.h"

namespace growtrace {

struct GroupReport {
    std::vector<uint64_t> stack_ids;  // leaf stack ids merged into this group (same frames)
    std::vector<Frame> frames;        // innermost first
    GrowthVerdict verdict;
    Significance significance;  // of an unbounded group; an insignificant one is not a finding
    // Estimates in a sampled trace (rounded), exact otherwise.
    uint64_t retained_bytes = 0;      // live at the end
    uint64_t live_allocations = 0;
    uint64_t allocations = 0;
    uint64_t allocated_bytes = 0;
    // Sampled traces: the allocation records behind the figures, those live at the end, and
    // the standard error of retained_bytes (0 in a full trace).
    uint64_t samples = 0;
    uint64_t live_samples = 0;
    double retained_bytes_stderr = 0;
    // Bytes this group held at the end of each window (same windows as the timeline).
    std::vector<uint64_t> retained_series;
    // A growing cache whose missed entries hold (nearly) all of what this group retains:
    // the group is a consequence of that finding, not a separate cause. Empty if none.
    std::string explained_by_cache;
};

struct TimelinePoint {
    double t_s = 0;           // end of the window, seconds since process start
    uint64_t heap_bytes = 0;  // traced heap
    uint64_t rss_bytes = 0;   // last RSS sample at or before t (0 if none yet)
};

struct ChildTrace {
    std::string kind;  // "fork" or "exec"
    uint64_t pid = 0;  // fork only
    std::string path;
};

// A cache announced by the CPython agent, with its inserting stack symbolized.
struct CacheReport {
    CacheFinding cache;
    std::vector<Frame> inserted_from;  // innermost first
};

// A container measured by the CPython agent's walks, with the stack that fills it symbolized.
struct ContainerReport {
    ContainerFinding container;
    std::vector<Frame> inserted_from;  // innermost first; empty when unknown
};

// Classes with one qualified name, with their most frequent creating stack.
struct TypeReport {
    TypeFinding type;
    std::vector<Frame> created_from;
};

// One stack's figures over the whole run, for profile exports (pprof): every stack the trace
// holds, not only the significant ones the reports classify. Frames are indices into
// AnalysisResult::profile_frames: a trace has many more stacks than distinct frames.
struct StackProfile {
    std::vector<uint32_t> frames;  // innermost first, interpreter plumbing folded out
    double inuse_bytes = 0;     // live at the end (estimates in a sampled trace)
    double inuse_objects = 0;
    double alloc_bytes = 0;     // allocated over the run
    double alloc_objects = 0;
    // The classifier's verdict and robust slope for a stack that ever held kMinSignificantBytes
    // (a group of stacks with the same frames shares its slope by live bytes); "small" and 0
    // for the others, which are never judged.
    std::string verdict = "small";
    double growth_bytes_per_s = 0;
    std::string cache;  // explained_by_cache of its group, if any
};

struct AnalysisResult;
// Findings of every kind: unbounded stacks, growing caches, duplicate classes.
size_t finding_count(const AnalysisResult& r);

struct AnalysisResult {
    std::string command;
    uint64_t pid = 0;
    double duration_s = 0;
    double window_s = 0;
    uint32_t trace_format_version = 0;
    bool ended_cleanly = false;
    uint64_t sample_period = 0;  // mean bytes between samples; 0 = every allocation recorded
    RetentionTotals totals;
    LedgerCheck ledger;  // the tracer's ledger against what the file holds
    std::vector<GroupReport> findings;  // unbounded groups, largest retained first
    std::vector<GroupReport> groups;    // other significant groups, largest retained first
    std::vector<CacheReport> cache_findings;  // caches that keep growing (JSON kind cache_growth)
    std::vector<CacheReport> caches;          // the other caches that were filled during the run
    std::vector<TypeReport> type_findings;    // JSON kind duplicate_types
    std::vector<TypeReport> types;            // other class names created many times
    std::vector<ContainerReport> container_findings;  // JSON kind container_growth
    std::vector<ContainerReport> containers;          // the other containers the walks measured
    // Every finding above in exactly one root cause, as its root or as evidence.
    std::vector<RootCause> root_causes;
    std::vector<TimelinePoint> timeline;
    std::vector<ChildTrace> children;
    std::vector<std::string> warnings;
    // What exports need beyond the reports.
    std::string exe;                 // the Process record's executable
    std::vector<std::string> argv;
    uint64_t start_realtime_ns = 0;  // CLOCK_REALTIME at process start (0 if unknown)
    std::vector<ModuleRecord> modules;  // every module the trace maps (its first record each)
    std::vector<StackProfile> stack_profiles;  // only with AnalyzeTraceOptions::stack_profiles
    std::vector<Frame> profile_frames;         // the frames stack_profiles index
};

}  // namespace growtrace
