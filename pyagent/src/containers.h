/* What a container walk reports (containers.c). */
#ifndef GROWTRACE_PYAGENT_CONTAINERS_H
#define GROWTRACE_PYAGENT_CONTAINERS_H

#include <Python.h>

extern unsigned long long g_walks_reported;

/* Module functions: large_containers(objects, deque_type, floor) -> list,
   report_containers(flags, walk_ns, items). */
PyObject *large_containers(PyObject *m, PyObject *args);
PyObject *report_containers(PyObject *m, PyObject *args);

#endif
