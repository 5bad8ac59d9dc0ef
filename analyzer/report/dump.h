// `growtrace dump TRACE`: every record of any trace, one per line, with block positions.
// Events show absolute ticks and addresses (deltas applied); unknown kinds show their size.
#pragma once

#include <ostream>
#include <string>

namespace growtrace {

// Writes the dump to out. Throws TraceError when the trace is corrupt, after printing
// everything that could be read before the damage.
void dump_trace(const std::string& path, std::ostream& out);

}  // namespace growtrace
