// When the agent's next container walk is due (docs/containers.md): the writer's cache poll
// asks for one (want_walk), and the next Python allocation on the main thread, which holds the
// GIL, runs the agent's tick (request_walk), which hands it a thread where Py_AddPendingCall
// reaches the evaluation loop. Walks stop at the program's exit mark.
#pragma once

#include <atomic>

namespace growtrace::preload::python {

// The agent's tick (its C API's set_tick); nullptr: the agent walks no containers.
void set_walk_tick(void (*tick)(void));
// A walk is due, unless walks have stopped or the agent has no tick.
void want_walk();
// No walk after this (the exit mark); a forked child's agent starts them again.
void stop_walks();
void allow_walks();

extern std::atomic<bool> g_walk_wanted;
// Called from the allocation hooks when g_walk_wanted is set.
void request_walk();

}  // namespace growtrace::preload::python
