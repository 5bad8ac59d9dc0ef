// The JSON report: a stable document for CI and tools. Schema version kJsonFormatVersion;
// fields are only ever added, never renamed or removed (see docs/trace-format.md, "Analysis
// report").
#pragma once

#include <nlohmann/json.hpp>

#include "analyzer/analysis/analysis.h"

namespace growtrace {

inline constexpr int kJsonFormatVersion = 1;

nlohmann::json report_json(const AnalysisResult& result);

}  // namespace growtrace
