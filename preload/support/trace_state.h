// Whether a trace is being recorded, and how the current one began: read by every layer
// (the hooks, the recorder, the writer, the CPython seam), set only by the session
// (preload/session/session.cpp), which is why they live below all of them.
#pragma once

#include <atomic>

namespace growtrace::preload {

enum class TracerState : int { Starting = 0, Active = 1, Stopped = 2 };
extern std::atomic<int> g_tracer_state;

inline bool tracer_active() {
    return g_tracer_state.load(std::memory_order_relaxed) == static_cast<int>(TracerState::Active);
}

inline void set_tracer_state(TracerState state) { g_tracer_state.store(static_cast<int>(state)); }

// How a trace began (preload/session/session.h has the three ways): each part with state of
// its own for the trace is reset with it.
enum class SessionOrigin { Preloaded, Forked, Attached };

// The traced process: differs from getpid() only in a vfork child, which must write nothing
// of its parent's trace. Set when a trace begins.
extern std::atomic<int> g_traced_pid;

}  // namespace growtrace::preload
