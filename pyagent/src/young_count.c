/* The interpreter's count of young objects, the first number of gc.get_count(): what a
   collection of generation 0 waits for. It lives in the interpreter's internal state, so this
   file alone is built with the version's internal headers (one build per version, as the
   agent). */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_interp.h>

#include "young_count.h"

int *growtrace_young_count(void) { return &PyInterpreterState_Get()->gc.generations[0].count; }
