#include "preload/support/trace_state.h"

namespace growtrace::preload {

std::atomic<int> g_tracer_state{static_cast<int>(TracerState::Starting)};
std::atomic<int> g_traced_pid{0};

}  // namespace growtrace::preload
