// The library's side of the contract with the CPython agent (pyagent/include/growtrace_py_api.h):
// turns the agent's calls into trace records, and samples the entry counts of the caches it
// announced.
#pragma once

#include "format/record_encoder.h"

namespace growtrace::preload::python {

// Called by the writer every tick: a CacheSize record for caches whose entry count changed.
void poll_cache_sizes(void (*sink)(const format::RecordEncoder&));

// Forget announced caches (forked child: the agent re-announces them).
void forget_caches();

}  // namespace growtrace::preload::python
