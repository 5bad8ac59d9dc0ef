/* The caches of a process the agent is attached to (`growtrace attach`): those made before it
 * get a probe put in their wrapper in place, new ones get one at the wrapper type's tp_new, and
 * at detach every wrapper gets its own function back. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "attached_caches.h"
#include "describe.h"
#include "probe.h"
#include "sinks.h"

/* functools._lru_cache_wrapper's object (Modules/_functoolsmodule.c, in no header), the same
   in CPython 3.10 to 3.13. Only `cache`, `func`, `maxsize` and `typed` are read or written, and only on an
   object whose type passes lru_layout_matches(). */
typedef struct {
    PyObject_HEAD
    void *prev, *next;
    Py_hash_t hash;
    PyObject *key, *result;
} GtLruListElem;

typedef struct {
    GtLruListElem root;
    void *wrapper;
    int typed;
    PyObject *cache;
    Py_ssize_t hits;
    PyObject *func;
    Py_ssize_t maxsize;
    Py_ssize_t misses;
    PyObject *kwd_mark;
    PyTypeObject *lru_list_elem_type;
    PyObject *cache_info_type;
    PyObject *dict;
    PyObject *weakreflist;
} GtLruCache;

/* The type's size and the offsets of its instance dict and weakref list are public (tp_*)
   and pin the layout around the fields used; the cache must be a dict. */
static int lru_layout_matches(PyTypeObject *tp) {
    return strcmp(type_name_of(tp), "functools._lru_cache_wrapper") == 0 &&
           tp->tp_basicsize == (Py_ssize_t)sizeof(GtLruCache) &&
           tp->tp_dictoffset == (Py_ssize_t)offsetof(GtLruCache, dict) &&
           tp->tp_weaklistoffset == (Py_ssize_t)offsetof(GtLruCache, weakreflist);
}

static GtLruCache *as_lru_cache(PyObject *o) {
    if (!lru_layout_matches(Py_TYPE(o))) return NULL;
    GtLruCache *lru = (GtLruCache *)o;
    return lru->cache && PyDict_CheckExact(lru->cache) && lru->func ? lru : NULL;
}

/* Puts a probe between the wrapper and its function; the probe takes over the wrapper's
   reference to the function. A thread already inside the function is unaffected. */
static ProbeObject *insert_probe(GtLruCache *lru, PyObject *on_first_miss) {
    PyObject *args = Py_BuildValue("(OO)", lru->func, on_first_miss ? on_first_miss : Py_None);
    if (!args) return NULL;
    ProbeObject *p = (ProbeObject *)make_probe(NULL, args);
    Py_DECREF(args);
    if (!p) return NULL;
    p->cache_dict = lru->cache;
    PyObject *old = lru->func;
    lru->func = Py_NewRef((PyObject *)p);
    Py_DECREF(old);
    return p;
}

/* adopt_cache(wrapper) -> (probe, cache_dict) or None: probes a cache created before the
   agent started. */
PyObject *adopt_cache(PyObject *m, PyObject *wrapper) {
    (void)m;
    GtLruCache *lru = as_lru_cache(wrapper);
    if (!lru) Py_RETURN_NONE;
    if (Py_IS_TYPE(lru->func, &ProbeType)) return Py_BuildValue("(OO)", lru->func, lru->cache);
    ProbeObject *p = insert_probe(lru, NULL);
    if (!p) return NULL;
    PyObject *r = Py_BuildValue("(OO)", p, lru->cache);
    Py_DECREF(p);
    return r;
}

/* Probes taken out of their wrappers. One may still be running in a thread that released
   the GIL inside the user function, so none is ever freed (a few dozen bytes per cache per
   attach). */
static PyObject *g_retired_probes;

/* release_cache(wrapper) -> bool: gives the wrapper its own function back. */
PyObject *release_cache(PyObject *m, PyObject *wrapper) {
    (void)m;
    GtLruCache *lru = as_lru_cache(wrapper);
    if (!lru || !Py_IS_TYPE(lru->func, &ProbeType)) Py_RETURN_FALSE;
    if (!g_retired_probes && !(g_retired_probes = PyList_New(0))) return NULL;
    ProbeObject *p = (ProbeObject *)lru->func;
    if (PyList_Append(g_retired_probes, (PyObject *)p) < 0) return NULL;
    Py_CLEAR(p->on_first_miss);
    lru->func = Py_NewRef(p->func);
    Py_DECREF(p);
    Py_RETURN_TRUE;
}

/* Every lru_cache created while attached, however the program imported lru_cache, passes
   through the wrapper type's tp_new: hook_new_caches(type, on_new, on_first_miss) points it at
   lru_new_probed, which probes the new cache and calls
   on_new(wrapper, probe, cache_dict, user_function, maxsize, typed). */
static PyTypeObject *g_lru_type;
static newfunc g_lru_new;
static PyObject *g_on_new_cache, *g_on_first_miss;

static PyObject *lru_new_probed(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *wrapper = g_lru_new(type, args, kwargs);
    if (!wrapper || !g_on_new_cache || (!g_native && g_log_fd < 0)) return wrapper;
    GtLruCache *lru = as_lru_cache(wrapper);
    if (!lru || Py_IS_TYPE(lru->func, &ProbeType)) return wrapper;
    ProbeObject *p = insert_probe(lru, g_on_first_miss);
    if (!p) { PyErr_Clear(); return wrapper; }
    PyObject *r = PyObject_CallFunction(g_on_new_cache, "OOOOni", wrapper, (PyObject *)p, lru->cache,
                                        p->func, lru->maxsize, lru->typed);
    if (!r) PyErr_Clear();
    Py_XDECREF(r);
    Py_DECREF(p);
    return wrapper;
}

PyObject *hook_new_caches(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *type, *on_new, *on_first_miss;
    if (!PyArg_ParseTuple(args, "O!OO", &PyType_Type, &type, &on_new, &on_first_miss)) return NULL;
    PyTypeObject *tp = (PyTypeObject *)type;
    if (!lru_layout_matches(tp) || !tp->tp_new) Py_RETURN_FALSE;
    if (tp->tp_new != lru_new_probed) {
        g_lru_type = tp;
        g_lru_new = tp->tp_new;
        tp->tp_new = lru_new_probed;
    }
    Py_XSETREF(g_on_new_cache, Py_NewRef(on_new));
    Py_XSETREF(g_on_first_miss, Py_NewRef(on_first_miss));
    Py_RETURN_TRUE;
}

PyObject *unhook_new_caches(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    if (g_lru_type && g_lru_type->tp_new == lru_new_probed) g_lru_type->tp_new = g_lru_new;
    Py_CLEAR(g_on_new_cache);
    Py_CLEAR(g_on_first_miss);
    Py_RETURN_NONE;
}
