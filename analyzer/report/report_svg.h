// `growtrace analyze --plot FILE.svg`: the report's curves as one standalone SVG document
// (no scripts, no external references): the traced heap and RSS over time, then one panel per
// finding with its retained bytes over time.
#pragma once

#include <ostream>

#include "analyzer/analysis/analysis.h"

namespace growtrace {

void write_svg_plot(const AnalysisResult& result, std::ostream& out);

}  // namespace growtrace
