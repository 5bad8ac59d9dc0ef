// Several traces analysed together: the ones named, and on request the traces their processes'
// forked children and exec'd images wrote (followed through their Fork and Exec records, down
// to the last generation). The CLI's analyze, report, check and export verbs take a set.
#pragma once

#include <string>
#include <vector>

#include "analyzer/analysis/analysis.h"

namespace growtrace {

struct TraceSetOptions {
    bool with_children = false;  // follow Fork and Exec records to the traces they name
    // Only the first named trace must be readable: the others are left out with a warning if
    // they are not (growtrace check, whose children may have died before their first flush).
    bool only_first_required = false;
    AnalyzeTraceOptions analysis;
};

struct AnalysedTrace {
    std::string path;
    AnalysisResult result;
};

struct AnalysedTraceSet {
    std::vector<AnalysedTrace> traces;  // the named ones in order, each followed by its children
    // Children named by a Fork or Exec record whose trace could not be found or read, each said
    // in one line; the set is analysed without them.
    std::vector<std::string> warnings;
};

// Throws TraceError if a named trace cannot be analysed. A child's trace is looked for at the
// path its record gives and, if the traces were moved, under the same name beside its parent.
AnalysedTraceSet analyze_trace_set(const std::vector<std::string>& paths, const TraceSetOptions& options);

// One name for a file however it is reached (relative, through links), for telling whether two
// paths are one trace: its canonical path, or the path itself where that cannot be made.
std::string trace_file_identity(const std::string& path);

}  // namespace growtrace
