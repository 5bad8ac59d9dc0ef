/* When a container walk runs (walks.c). */
#ifndef GROWTRACE_PYAGENT_WALKS_H
#define GROWTRACE_PYAGENT_WALKS_H

#include <Python.h>

/* Whether a walker is set, none is running and the walks' share of the time allows one now. */
int walk_is_due(void);
/* One walk now, as the agent's own work; the program's exception in flight is kept. */
void run_walk(void);

/* Module functions: own_work(callable, arg), walk_due() -> bool,
   set_walker(callable or None, min_period_s, share). */
PyObject *own_work_call(PyObject *m, PyObject *args);
PyObject *walk_due(PyObject *m, PyObject *noargs);
PyObject *set_walker(PyObject *m, PyObject *args);

#endif
