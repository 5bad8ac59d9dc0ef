// The profiles of analysed traces as one pprof Profile (github.com/google/pprof,
// proto/profile.proto), the format continuous-profiling backends (Grafana Pyroscope, Parca) and
// `go tool pprof` read. Every stack of every trace is a sample with five values:
//   inuse_space/bytes, inuse_objects/count   live at the end of the trace
//   alloc_space/bytes, alloc_objects/count   allocated over the trace
//   growth/bytes_per_second                  the classifier's robust slope (0 if never judged)
// and labels: verdict (unbounded, bounded, transient, stable, undetermined, or small for a
// stack that never held enough to judge), cache (the growing cache whose entries the memory
// is, if any) and pid (numeric). Native frames belong to a mapping per module and process,
// Python frames to one mapping named [python], frames outside every module to [unknown].
// Everything is symbolized: mappings say has_functions, so readers do not try again.
#pragma once

#include <string>
#include <vector>

#include "analyzer/analysis/analysis.h"

namespace growtrace {

// The uncompressed Profile message. Results need AnalyzeTraceOptions::stack_profiles.
std::string pprof_profile(const std::vector<const AnalysisResult*>& results);

// gzip (RFC 1952) of data, as pprof files are stored. Throws std::runtime_error if zlib fails.
std::string gzip_compress(const std::string& data);

}  // namespace growtrace
