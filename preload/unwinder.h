// Native stack capture through libunwind. libunwind is loaded with RTLD_LOCAL at start-up
// rather than linked: libunwind.so also defines the _Unwind_* functions of the C++ exception
// ABI, and as a dependency of a preloaded library it would take them over from libgcc_s in
// the traced program.
#pragma once

#include <cstdint>

namespace growtrace::preload {

inline constexpr int kMaxFrames = 128;

// Loads libunwind; false (with a message) if it cannot be found.
bool unwinder_init();

// Fills ips with return addresses, innermost first, skipping the tracer's own frames.
// Returns the number of frames stored.
int capture_stack(uint64_t* ips, int max_frames);

}  // namespace growtrace::preload
