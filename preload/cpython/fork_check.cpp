#include "preload/cpython/fork_check.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "preload/cpython/interpreter.h"

namespace growtrace::preload::python {

bool fork_counts_threads() {
    if (!present() || !initialized()) return false;
    const Interpreter& python = interpreter();
    if (python.major < 3 || (python.major == 3 && python.minor < 12)) return false;
    return syscall(SYS_gettid) == getpid();
}

bool run_when_back_in_python(int (*function)(void*)) {
    return interpreter().api.add_pending_call(function, nullptr) == 0;
}

}  // namespace growtrace::preload::python
