// Whether gdb may and should attach to a process: every reason it could not (or should not)
// that can be told before running it (ownership, kernel.yama.ptrace_scope, a stopped process,
// another tracer, a static or foreign program).
#pragma once

#include <optional>
#include <string>

namespace growtrace::cli {

// Why `growtrace attach` (attaching) or `detach` cannot work on the process; nothing if it can.
std::optional<std::string> check_target(int pid, bool attaching);

}  // namespace growtrace::cli
