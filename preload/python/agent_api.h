// The library's side of the contract with the CPython agent (contracts/growtrace_py_api.h):
// turns the agent's calls into trace records, and samples the entry counts of the caches it
// announced.
#pragma once

#include <atomic>

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
// The agent's container walks (docs/containers.md): the writer's tick sets g_walk_wanted, and the
// next Python allocation on the main thread (which holds the GIL) calls request_walk(), which
// hands the agent's tick a thread where Py_AddPendingCall reaches the evaluation loop.
extern std::atomic<bool> g_walk_wanted;
void request_walk();

}  // namespace growtrace::preload::python
