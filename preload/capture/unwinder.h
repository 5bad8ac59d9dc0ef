// Native stack capture through libunwind. libunwind is loaded with RTLD_LOCAL at start-up
// rather than linked: libunwind.so also defines the _Unwind_* functions of the C++ exception
// ABI, and as a dependency of a preloaded library it would take them over from libgcc_s in
// the traced program.
#pragma once

#include <atomic>
#include <cstdint>

#include "preload/capture/cfi_unwinder.h"

namespace growtrace::preload {

inline constexpr int kMaxFrames = 128;
static_assert(kMaxFrames + 8 <= kMaxWalkFrames, "a walk keeps room for the tracer's own frames");

// Loads libunwind; false (with a message) if it cannot be found.
bool unwinder_init();
// Before the library is unloaded: libunwind's descriptor calls go back to libc's, and our
// handle of it is closed (it is unloaded too unless the program uses it).
void unwinder_release();

// Fills ips with return addresses, innermost first, skipping the tracer's own frames.
// Returns the number of frames stored. `in_progress` is the calling thread's count of
// captures under way (ThreadState::unwinding), which a fork waits for: see below. `memo` is the
// calling thread's previous walk (cfi_unwinder.h), or null where the state is shared; `start`
// the interposed function's frame, where the walk may begin.
int capture_stack(uint64_t* ips, int max_frames, std::atomic<int>& in_progress, WalkMemo* memo,
                  WalkStart start = {});

// A thread inside libunwind at the moment of a fork may hold one of libunwind's locks (or the
// loader's, in dl_iterate_phdr); in the child that lock stays held for ever and the child's
// first capture waits for it. So a fork closes the unwinder (captures started from then on do
// without native frames: the program's threads never wait for a fork of ours), waits for the
// captures under way to end, and opens it again in both processes.
void unwinder_close_for_fork();
// Until `in_progress` is zero (bounded: a thread stopped for a long time is not waited for
// beyond a second).
void unwinder_wait_for(const std::atomic<int>& in_progress);
void unwinder_open_after_fork();

}  // namespace growtrace::preload
