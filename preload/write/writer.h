// The writer: a background thread that, every tick, gathers the records of all threads and
// of the tracer itself, adds a time mark, and appends them to the trace as one block.
// Compression and disk I/O happen here, never in an allocation hook.
#pragma once

#include <cstdint>

#include "format/record_encoder.h"
#include "preload/record/event_buffer.h"
#include "preload/support/trace_state.h"

namespace growtrace::preload {

class TraceFile;

// Starts the thread (signals blocked, named "growtrace-wr", invisible to the tracer).
bool writer_start(TraceFile* file, unsigned tick_ms);

// Queue a record of the tracer's own (module, time mark, fork, exec...). Thread-safe.
void writer_emit(const format::RecordEncoder& record);
// The program began to exit at `ticks` (its Exiting record is emitted by the caller).
void writer_note_exit(uint64_t ticks);

// Ask for a module rescan at the next opportunity (an unknown instruction pointer was seen).
void writer_request_module_scan();

// A task the writer thread runs after each tick's cycle, outside the writer's locks (attach:
// patching the objects the program loaded since). One at most; nullptr for none.
void writer_run_each_tick(void (*task)());

// Wake the writer early: many full buffers are waiting.
void writer_wake();

// The main thread is ending while others may run (pthread_exit, or the forking thread of a
// forked child returning): the writer now watches for the end of the program's last thread.
void writer_note_main_thread_ended();

// Gather and write everything now, from the calling thread. `final` adds the End record and
// closes the file. Safe to call from any thread; serialised with the writer thread.
void writer_flush(bool final);
// After a final flush: waits until the writer thread has ended and the kernel no longer counts
// it, at most about `timeout_ms` (then false). Only for an attach that failed: its library is
// about to be unloaded.
bool writer_wait_until_ended(int timeout_ms);
// Before an exec: every event recorded so far is written, with the ledger as it stands.
void writer_flush_before_exec();

// CPython 3.12+ warns at os.fork() when /proc/self/stat counts more than one thread, which the
// writer thread would be in a program of one thread. For such a fork (preload/session/session.cpp) the
// thread leaves before it: false if it was not running. Nothing is lost meanwhile (its work
// waits in the buffers) and no lock of the fork is held while it leaves; it comes back with
// writer_resume(), or by itself when producers would otherwise wait for buffers.
bool writer_park_for_fork();
// Starts the parked writer again; nothing if it is not parked (or the trace has ended).
void writer_resume();

// Around fork(): the child gets a new file and a new thread (writer_start, after the reset).
void writer_prepare_fork();
void writer_parent_after_fork();
void writer_child_after_fork();

// A new trace (the session's reset): forget the previous one's records, live allocations and
// failed write, before writer_start() starts the writer for it.
void writer_reset(SessionOrigin origin);
// Frees the writer's staging buffers (before the library is unloaded, the writer ended).
void writer_release_memory();

}  // namespace growtrace::preload
