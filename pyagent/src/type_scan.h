/* New classes found at collections (type_scan.c). */
#ifndef GROWTRACE_PYAGENT_TYPE_SCAN_H
#define GROWTRACE_PYAGENT_TYPE_SCAN_H

#include <Python.h>

/* The collector's oldest generation: a collection of it is a full one. */
#define GT_OLDEST_GENERATION 2

/* At start(): the scan's gc.get_objects, and a final scan to come again. */
void type_scan_start(PyObject *get_objects);
/* At the start of a collection of generation `collected`: the classes made since the last one,
   when the scan is enabled and its final scan not done yet. */
void type_scan_at_collection(int collected);

/* Module functions: scan_young_types(), type_scan_final(), enable_type_scan(). */
PyObject *scan_young_types(PyObject *m, PyObject *noargs);
PyObject *type_scan_final(PyObject *m, PyObject *noargs);
PyObject *enable_type_scan(PyObject *m, PyObject *noargs);

#endif
