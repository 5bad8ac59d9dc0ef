/* Probes put in and taken out of the caches of a process the agent is attached to
   (attached_caches.c). */
#ifndef GROWTRACE_PYAGENT_ATTACHED_CACHES_H
#define GROWTRACE_PYAGENT_ATTACHED_CACHES_H

#include <Python.h>

/* Module functions: adopt_cache(wrapper), release_cache(wrapper),
   hook_new_caches(type, on_new, on_first_miss), unhook_new_caches(). */
PyObject *adopt_cache(PyObject *m, PyObject *wrapper);
PyObject *release_cache(PyObject *m, PyObject *wrapper);
PyObject *hook_new_caches(PyObject *m, PyObject *args);
PyObject *unhook_new_caches(PyObject *m, PyObject *noargs);

#endif
