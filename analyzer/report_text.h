// The human report: leads with the answer (the unbounded growth findings and their stacks),
// then one line on the large memory that is not a finding.
#pragma once

#include <ostream>
#include <string>

#include "analyzer/analysis.h"

namespace growtrace {

void write_text_report(const AnalysisResult& result, std::ostream& out);

// "1.9 MB", "512 B" (decimal units, as users compare with RSS in top).
std::string human_bytes(double bytes);

}  // namespace growtrace
