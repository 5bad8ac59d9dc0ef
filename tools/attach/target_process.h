// What /proc says about the process `growtrace attach` works on.
#pragma once

#include <string>

namespace growtrace::cli {

std::string read_text(const std::string& path);
// The value of a "Name:\tvalue" line of /proc/PID/status, "" if there is none.
std::string status_field(int pid, const std::string& name);
// Alive: exists and is not a zombie waiting for its parent.
bool process_exists(int pid);
// Its command name (/proc/PID/comm).
std::string process_name(int pid);
// Whether the tracer's writer thread ("growtrace-wr") runs in the process: from the start of
// an attach until its trace is complete. (The tracer keeps no descriptor open to look for.)
bool tracer_writing(int pid);

}  // namespace growtrace::cli
