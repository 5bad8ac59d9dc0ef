#include "preload/support/recursion_guard.h"

namespace growtrace::preload {

__thread bool t_in_tracer __attribute__((tls_model("initial-exec"))) = false;
__thread bool t_agent_work __attribute__((tls_model("initial-exec"))) = false;

}  // namespace growtrace::preload
