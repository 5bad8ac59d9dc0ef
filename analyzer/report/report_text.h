// The human report: leads with the answer (the unbounded growth findings and their stacks),
// then one line on the large memory that is not a finding.
#pragma once

#include <ostream>
#include <string>

#include "analyzer/analysis/analysis.h"
#include "analyzer/model/units.h"

namespace growtrace {

void write_text_report(const AnalysisResult& result, std::ostream& out);

// A stack as the text report prints it, indented, innermost first, the first 16 frames.
void write_frames(const std::vector<Frame>& frames, std::ostream& out);

}  // namespace growtrace
