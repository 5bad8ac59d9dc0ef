/* A cache's creation and destruction, sent to the sinks (cache_records.c). */
#ifndef GROWTRACE_PYAGENT_CACHE_RECORDS_H
#define GROWTRACE_PYAGENT_CACHE_RECORDS_H

#include <Python.h>

/* Module functions: capture_stack() -> stack id, cache_created(...), cache_destroyed(cache_id). */
PyObject *capture_stack(PyObject *m, PyObject *noargs);
PyObject *cache_created(PyObject *m, PyObject *args);
PyObject *cache_destroyed(PyObject *m, PyObject *args);

#endif
