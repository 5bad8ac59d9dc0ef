// The recorder: turns allocation events into records in the calling thread's buffer. This is
// the hot path: no global lock, no system call, no allocation (the first event of a thread
// allocates its buffer, outside any user lock).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "format/trace_format.h"
#include "preload/event_buffer.h"

namespace growtrace::preload {

enum class TracerState : int { Starting = 0, Active = 1, Stopped = 2 };
extern std::atomic<int> g_tracer_state;

inline bool tracer_active() {
    return g_tracer_state.load(std::memory_order_relaxed) == static_cast<int>(TracerState::Active);
}

// Reads the configuration, opens the trace and starts the writer. Called once, from the
// library constructor.
void recorder_start();
// Flush and close at process exit.
void recorder_stop();
// Stop tracing because the tracer cannot go on (disk full, file removed...); logs why.
void recorder_fail(const char* why);

// An allocation seen by malloc & co: native stack, merged with the Python frames if the
// thread runs Python.
void record_alloc(void* ptr, size_t size);
// An allocation seen by the Python allocator hooks: Python frames only.
void record_python_alloc(void* ptr, size_t size);
// A free, recorded before the real one. In sampled mode only a live sample's free is recorded
// (the others return false at once, most after one load of the sampler's filter).
bool record_free(void* ptr);

// realloc's old block: its free is recorded before the real call (the address may be reused
// at once), and taken back if the call fails and the block lives on, so that the trace never
// sees it freed and keeps its size, stack and age. Until then (or the end of the object) the
// writer leaves the thread's buffer alone; nothing else is recorded by this thread meanwhile
// (the recursion guard is held).
class FreeBeforeResize {
public:
    explicit FreeBeforeResize(void* ptr);  // ptr may be null: nothing to record
    ~FreeBeforeResize();
    FreeBeforeResize(const FreeBeforeResize&) = delete;
    FreeBeforeResize& operator=(const FreeBeforeResize&) = delete;
    // Whether a free was recorded (in sampled mode, only a live sample's is).
    bool recorded() const { return recorded_; }
    // The call failed: the free is removed from the trace. False when it could no longer be
    // (another thread wrote after it into a buffer they share); the caller records the block
    // allocated again instead.
    bool take_back();

private:
    alignas(8) unsigned char place_[64];
    void* ptr_ = nullptr;
    bool recorded_ = false;
    bool settled_ = false;
};

// For the Python agent's records. The stack id of the calling thread's merged stack, dropping
// innermost frames in [skip_begin, skip_end); 0 when not tracing.
uint32_t record_stack(uint64_t skip_begin, uint64_t skip_end);
// A thread event (CacheCreate, CacheInsert, TypeCreate): dticks is prepended to body.
void record_thread_event(format::RecordKind kind, const uint8_t* body, size_t size);

void recorder_after_fork_in_parent(int child_pid);
// The program begins to exit (main returned, exit() called, or CPython's atexit): an Exiting
// record, after which the analyzer counts no more frees (shutdown is not the steady state).
void recorder_program_exiting();

// Before an exec: the trace so far is flushed. Returns whether the new image will be traced.
bool recorder_before_exec();
void recorder_before_dlclose();

// For the writer: hands every thread's pending buffer to `take` (skipping threads that are in
// the middle of writing an event; they are picked up next tick) and recycles the states of
// threads that have exited.
void recorder_collect_thread_buffers(void (*take)(Buffer*));

// Attach mode (preload/attach.cpp): starts a trace to `output` in a running process, also
// after an earlier attach ended with recorder_stop(), sampled with a mean of `sample_bytes`
// bytes between samples (0: every allocation). False if already tracing or on failure.
bool recorder_start_attached(const char* output, uint64_t sample_bytes = 0);

}  // namespace growtrace::preload
