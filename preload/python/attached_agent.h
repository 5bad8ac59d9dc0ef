// The CPython agent in a process growtrace attached to (growtrace attach): no sitecustomize
// runs there, so the library starts the agent itself, from a thread of its own that takes the
// GIL like any embedding application (PyGILState_Ensure); the interrupted thread gdb uses is
// never asked to run Python. Stopping undoes the agent the same way before the trace ends.
#pragma once

namespace growtrace::preload::python {

// Called before the trace starts (gdb allocates the strings in the process with its malloc,
// which must not be traced): remembers where the agent is. Returns the version (311 for 3.11)
// if the process runs a CPython growtrace reads and the agent will start with the trace, 0 if
// not (nothing to do), -1 if the agent's files are missing.
int prepare_attached_agent(const char* startup_dir, const char* extension_path);

// Once the trace started: starts the prepared agent from a new thread, which runs it as soon
// as it gets the GIL. False if none was prepared or no thread could be started.
bool start_attached_agent();

// The prepared agent's extension, "" if none: an image exec'd by the attached process loads it
// (its sitecustomize is beside it) as under `growtrace run`.
const char* attached_agent_extension();

// True from a successful start_attached_agent until stop_attached_agent.
bool attached_agent_started();

// Undoes the agent under the GIL from a thread of ours, puts back the allocator hooks, then
// calls finish() (which ends the trace). Returns at once.
void stop_attached_agent(void (*finish)());

}  // namespace growtrace::preload::python
