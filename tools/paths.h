// Paths the verbs share: making user paths absolute (a traced or attached process may run in
// another directory), and finding the preload library.
#pragma once

#include <string>

namespace growtrace::cli {

std::string current_directory();
std::string make_absolute(const std::string& path);
// $GROWTRACE_PRELOAD, else <dir of this executable>/../lib/libgrowtrace.so.
std::string preload_library_path();
// The library preloaded into the gdb that attach runs (tools/attach/gdb_xstate_shim.c):
// <dir of this executable>/../lib/libgrowtrace-gdb-xstate.so.
std::string gdb_xstate_shim_path();
// The CPython agent (pyagent/, docs/cpython.md): $GROWTRACE_PYAGENT_DIR, else
// <dir of the preload library>/../share/growtrace/python. Empty when not built.
std::string python_agent_dir(const std::string& library);
// Its C extension inside that folder.
std::string python_agent_extension(const std::string& agent_dir);

}  // namespace growtrace::cli
