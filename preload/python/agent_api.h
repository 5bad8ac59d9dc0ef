// The library's side of the contract with the CPython agent (contracts/growtrace_py_api.h):
// turns the agent's calls into trace records, and samples the entry counts of the caches it
// announced.
#pragma once

#include "format/record_encoder.h"

namespace growtrace::preload::python {

// Called by the writer every tick: a CacheSize record for caches whose entry count changed
// since the last poll. `every_cache`: one for each cache still watched, changed or not (the
// last poll, at exit: a cache filled and emptied again between two polls, its clear() at the
// end of the program, would otherwise look unchanged, and the analyzer would be left with the
// count of its last insertion).
void poll_cache_sizes(void (*sink)(const format::RecordEncoder&), bool every_cache = false);

// Forget announced caches (forked child: the agent re-announces them).
void forget_caches();

}  // namespace growtrace::preload::python
