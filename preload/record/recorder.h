// The recorder: turns allocation events into records in the calling thread's buffer. This is
// the hot path: no global lock, no system call, no allocation (the first event of a thread
// allocates its buffer, outside any user lock).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "format/trace_format.h"
#include "preload/capture/cfi_unwinder.h"
#include "preload/capture/stack_tree.h"
#include "preload/support/trace_state.h"

namespace growtrace::preload {

// The current trace's stack tree, into which the hot path interns stacks; the session makes,
// resets and releases it.
extern constinit StackTree g_stack_tree;

// An allocation seen by malloc & co: native stack, merged with the Python frames if the
// thread runs Python. `caller`: the interposed function's own frame (GT_CALLER in hooks.cpp),
// where the walk of the stack begins.
void record_alloc(void* ptr, size_t size, WalkStart caller = {});
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

}  // namespace growtrace::preload
