#include "preload/support/recursion_guard.h"

namespace growtrace::preload {

__thread bool t_in_tracer __attribute__((tls_model("initial-exec"))) = false;
__thread bool t_agent_work __attribute__((tls_model("initial-exec"))) = false;
__thread bool t_in_wrapped_allocator __attribute__((tls_model("initial-exec"))) = false;
__thread uintptr_t t_wrapped_block __attribute__((tls_model("initial-exec"))) = 0;

}  // namespace growtrace::preload
