// What `growtrace --version` says: the version, the trace format versions written and read,
// and the CPython versions whose agent is installed beside the preload library.
#pragma once

#include <string>
#include <vector>

namespace growtrace::cli {

// "3.10", "3.11"... for each _growtrace_agent.cpython-3XY-*.so in `agent_dir`, in order.
std::vector<std::string> agent_python_versions(const std::string& agent_dir);

std::string version_text();

}  // namespace growtrace::cli
