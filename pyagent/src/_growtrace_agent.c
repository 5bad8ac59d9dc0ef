/* _growtrace_agent: the C half of growtrace's CPython agent (CPython 3.10 to 3.13; built once
 * per version, against that version's headers, by pyagent/CMakeLists.txt). This file is the
 * module: its functions, start and stop, the mark at exit. The rest, one job a file:
 *
 * - probe.c: the probe, a callable that stands in for the user function inside a
 *   functools._lru_cache_wrapper and reports each miss; describe.c describes its keys and
 *   values without running the program's code.
 * - cache_records.c: the creation and destruction of a cache, as the Python half tells them.
 * - attached_caches.c: under `growtrace attach`, probes put in the caches that exist and in new
 *   ones at the wrapper type's constructor, and taken out again at detach.
 * - gc_callbacks.c: one callable in the collector's own list of callbacks (the program's
 *   gc.callbacks is another list) that reports the start and stop of full collections, and
 *   the one full collection the agent runs itself at the shutdown mark; type_scan.c reports the
 *   new heap types found at collections where the library does not hook PyType_Ready.
 * - walks.c: when a container walk runs; containers.c: what it reports.
 * - sinks.c: the preload library's API (growtrace_py_get_api, see growtrace_py_api.h) when
 *   present, else JSON lines to $GROWTRACE_PYAGENT_LOG (for tests), else nothing.
 * - young_count.c: the interpreter's count of young objects, which the agent's work leaves as
 *   it found it.
 *
 * The Python half (pyagent/startup/growtrace-agent.py) patches functools.lru_cache, resolves
 * names and walks the containers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include "attached_caches.h"
#include "cache_records.h"
#include "containers.h"
#include "gc_callbacks.h"
#include "probe.h"
#include "sinks.h"
#include "type_scan.h"
#include "walks.h"

#if PY_VERSION_HEX < 0x030A0000
#error "_growtrace_agent needs CPython 3.10 or newer (the build only asks for versions with a layout)"
#endif

/* start(get_objects, log_path or None, agent_path, api_address=0) -> features (int, -1 = no
   sink). api_address: growtrace_py_get_api when the library, loaded by `growtrace attach`
   outside the global symbol scope, starts the agent itself. */
static PyObject *start(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *get_objects, *log_path, *agent_path;
    unsigned long long api_address = 0;
    if (!PyArg_ParseTuple(args, "OOU|K", &get_objects, &log_path, &agent_path, &api_address)) return NULL;
    /* A subinterpreter (its site runs sitecustomize too) is left alone: the agent's state is one
       per process and holds the main interpreter's objects; a subinterpreter taking it over
       released the objects of one that had ended (CPython 3.12's test_atexit made three in a
       row and crashed in the second). */
    if (PyInterpreterState_Get() != PyInterpreterState_Main()) return PyLong_FromLong(-1);
    type_scan_start(get_objects);
    growtrace_py_get_api_fn get = api_address
        ? (growtrace_py_get_api_fn)(uintptr_t)api_address
        : (growtrace_py_get_api_fn)dlsym(RTLD_DEFAULT, "growtrace_py_get_api");
    g_native = get ? get(GROWTRACE_PY_API_VERSION) : NULL;
    if (g_native) {
        Py_ssize_t l;
        growtrace_py_agent_info info = {0};
        info.size = sizeof info;
        info.python_hexversion = PY_VERSION_HEX;
        info.agent_path = utf8_or_empty(agent_path, &l);
        info.agent_path_len = (size_t)l;
        if (g_native->agent_attach(&info) != 0) g_native = NULL;
    }
    if (log_path != Py_None) {
        PyObject *bytes = PyUnicode_EncodeFSDefault(log_path);
        if (!bytes) return NULL;
        if (g_log_fd >= 0) close(g_log_fd);
        g_log_fd = open(PyBytes_AS_STRING(bytes), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        Py_DECREF(bytes);
        if (g_log_fd < 0) return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, log_path);
    }
    if (!g_native && g_log_fd < 0) return PyLong_FromLong(-1);
    return PyLong_FromUnsignedLong(g_native ? g_native->features : 0);
}

/* stop(): the tracer detached. Probes still in place become plain calls. */
static PyObject *stop(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    g_native = NULL;
    Py_RETURN_NONE;
}

/* process_exiting(): the agent's atexit callback, the last to run. One full collection first
   (as the interpreter's own shutdown would, and not if the program disabled the collector), so
   that what the program is measured to hold at the mark is what it holds, not garbage awaiting
   a collection; then the library marks the start of shutdown. */
static PyObject *process_exiting(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    collect_at_shutdown();
    if (g_native && g_native->size >= offsetof(growtrace_py_api, process_exiting) + sizeof(void *) &&
        g_native->process_exiting)
        g_native->process_exiting();
    Py_RETURN_NONE;
}

static PyObject *stats(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    return Py_BuildValue("{sKsKsKsKsOsK}", "caches", g_counts[0], "miss_begin", g_counts[1],
                         "miss_end", g_counts[2], "types", g_counts[3], "native",
                         g_native ? Py_True : Py_False, "walks", g_walks_reported);
}

static PyMethodDef methods[] = {
    {"start", start, METH_VARARGS, NULL},
    {"make_probe", make_probe, METH_VARARGS, NULL},
    {"attach_probe", attach_probe, METH_VARARGS, NULL},
    {"new_cache_id", new_cache_id, METH_NOARGS, NULL},
    {"capture_stack", capture_stack, METH_NOARGS, NULL},
    {"cache_created", cache_created, METH_VARARGS, NULL},
    {"cache_destroyed", cache_destroyed, METH_VARARGS, NULL},
    {"scan_young_types", scan_young_types, METH_NOARGS, NULL},
    {"take_gc_callbacks", take_gc_callbacks, METH_O, NULL},
    {"give_back_gc_callbacks", give_back_gc_callbacks, METH_O, NULL},
    {"enable_type_scan", enable_type_scan, METH_NOARGS, NULL},
    {"type_scan_final", type_scan_final, METH_NOARGS, NULL},
    {"stats", stats, METH_NOARGS, NULL},
    {"stop", stop, METH_NOARGS, NULL},
    {"adopt_cache", adopt_cache, METH_O, NULL},
    {"release_cache", release_cache, METH_O, NULL},
    {"hook_new_caches", hook_new_caches, METH_VARARGS, NULL},
    {"unhook_new_caches", unhook_new_caches, METH_NOARGS, NULL},
    {"process_exiting", process_exiting, METH_NOARGS, NULL},
    {"set_walker", set_walker, METH_VARARGS, NULL},
    {"own_work", own_work_call, METH_VARARGS, NULL},
    {"walk_due", walk_due, METH_NOARGS, NULL},
    {"report_containers", report_containers, METH_VARARGS, NULL},
    {"large_containers", large_containers, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_growtrace_agent", NULL, -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__growtrace_agent(void) {
    if (PyType_Ready(&ProbeType) < 0) return NULL;
    return PyModule_Create(&module);
}
