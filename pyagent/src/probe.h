/* The probe an lru_cache wrapper calls instead of the user function (probe.c). */
#ifndef GROWTRACE_PYAGENT_PROBE_H
#define GROWTRACE_PYAGENT_PROBE_H

#include <Python.h>
#include <stdint.h>

typedef struct {
    PyObject_HEAD
    PyObject *func;        /* the user's function */
    PyObject *cache_dict;  /* borrowed: owned by the lru wrapper, which owns us */
    PyObject *on_first_miss; /* Python callable(probe) that announces the cache, or NULL */
    uint64_t cache_id;
    uint64_t seq;
    vectorcallfunc vectorcall;
} ProbeObject;

extern PyTypeObject ProbeType;

/* Module functions: make_probe(func, on_first_miss) -> Probe; attach_probe(probe, cache_dict);
   new_cache_id() -> int. */
PyObject *make_probe(PyObject *m, PyObject *args);
PyObject *attach_probe(PyObject *m, PyObject *args);
PyObject *new_cache_id(PyObject *m, PyObject *noargs);

#endif
