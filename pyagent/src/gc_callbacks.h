/* The agent's callback in the collector's own list, and the program's gc.callbacks kept as it
   sees them (gc_callbacks.c). */
#ifndef GROWTRACE_PYAGENT_GC_CALLBACKS_H
#define GROWTRACE_PYAGENT_GC_CALLBACKS_H

#include <Python.h>

/* The full collection at the shutdown mark, reported as such; none if the program disabled the
   collector or there is no sink. */
void collect_at_shutdown(void);

/* Module functions: take_gc_callbacks(gc) -> bool, give_back_gc_callbacks(gc). */
PyObject *take_gc_callbacks(PyObject *m, PyObject *gc_module);
PyObject *give_back_gc_callbacks(PyObject *m, PyObject *gc_module);

#endif
