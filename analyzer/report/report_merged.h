// The reports of several traces analysed together (merged_analysis.h): text and JSON. The JSON
// is the one-trace document's schema, every field kept, with fields added: see
// docs/trace-format.md, "Analysis report of several traces".
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "analyzer/analysis/merged_analysis.h"
#include "analyzer/analysis/trace_set.h"

namespace growtrace {

nlohmann::json merged_report_json(const AnalysedTraceSet& set, const MergedAnalysis& merged);
void write_merged_text_report(const AnalysedTraceSet& set, const MergedAnalysis& merged, std::ostream& out);

// "in 2 of 3 processes of `gunicorn app:app` (pids 11, 12): 3.1 MB each, +0.4 MB/s in all"
std::string merged_summary(const AnalysedTraceSet& set, const MergedAnalysis& merged, const MergedFinding& f);

}  // namespace growtrace
