// The analysis of one trace: reads it, builds the retention model, symbolizes and groups the
// stacks that matter, classifies each group and arranges the findings in root causes. The
// result (analysis_result.h) is plain data that the reports render.
#pragma once

#include <string>

#include "analyzer/analysis/analysis_result.h"
#include "analyzer/analysis/root_causes.h"

namespace growtrace {

struct AnalyzeTraceOptions {
    bool stack_profiles = false;  // fill AnalysisResult::stack_profiles (symbolizes every stack)
};

// How many non-finding groups a result keeps (largest retained first).
inline constexpr size_t kMaxReportedGroups = 20;
// Windows narrower than this are merged: finer resolution only adds noise to the classifier.
inline constexpr double kMinWindowSeconds = 0.010;

// Throws TraceError on unreadable or corrupt input.
AnalysisResult analyze_trace(const std::string& path, const AnalyzeTraceOptions& options = {});

}  // namespace growtrace
