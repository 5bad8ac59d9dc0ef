// The list of loaded objects, written to the trace so that the analyzer can symbolise
// offline. Scanned with dl_iterate_phdr by the writer thread (at start, when the loader's
// add/remove counters move, and on request) and before dlclose, never from an allocation
// hook: the loader lock may be held by the thread that is allocating.
#pragma once

#include <cstdint>

#include "format/record_encoder.h"

namespace growtrace::preload {

using RecordSink = void (*)(const format::RecordEncoder&);

// Emits Module records for objects not yet written (or ModulesReset and all of them when
// something was unloaded). Thread-safe; cheap when nothing changed. force: scan even when
// the loader's counters did not move.
void module_map_scan(RecordSink sink, bool force);

// Around fork(): a scan in another thread must not leave the child with a held lock.
void module_map_prepare_fork();
void module_map_parent_after_fork();
void module_map_child_after_fork();
// A new trace (forked child, attach): write every module again.
void module_map_forget();
// Forgets them and unmaps the tables of ranges (before the library is unloaded).
void module_map_release();

// The program's path, read now (and remembered: once its main thread has ended, as after
// pthread_exit, /proc/self/exe cannot be read any more). Called when a trace starts, so that
// later scans name the program whatever happens to that thread.
const char* module_map_program_path();

// Lock-free: is ip inside an executable segment written to the trace so far?
bool module_map_covers(uint64_t ip);

}  // namespace growtrace::preload
