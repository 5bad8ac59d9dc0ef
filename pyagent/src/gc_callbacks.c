/* The agent's entry in the collector's own list of callbacks: at the start and stop of each
 * collection it reports full collections, scans for new classes (type_scan.c) and runs a
 * container walk that is due (walks.c), then calls the program's gc.callbacks as the collector
 * would. Also the full collection the agent runs itself at the shutdown mark. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "gc_callbacks.h"
#include "sinks.h"
#include "type_scan.h"
#include "walks.h"

/* Full collections (the oldest generation): reported at their start and stop, so that the
   analyzer knows which frees are garbage being reclaimed rather than memory the program let go
   of. The one the agent runs at the shutdown mark reports itself (the program may have emptied
   gc.callbacks). */
static int g_final_collecting; /* the agent's own collection at the shutdown mark is running */

static int has_gc_api(void) {
    return g_native && g_native->size >= offsetof(growtrace_py_api, gc_collection) + sizeof(void *) &&
           g_native->gc_collection;
}

static void report_collection(uint32_t phase, uint32_t generation, uint32_t flags) {
    if (has_gc_api()) g_native->gc_collection(phase, generation, flags);
    if (g_log_fd >= 0) {
        char store[256];
        Buf b = {store, 0, sizeof store, 0};
        store[0] = '\0';
        log_begin(&b, "gc_collection");
        buf_printf(&b, ",\"phase\":\"%s\",\"generation\":%u,\"flags\":%u",
                   phase == GROWTRACE_PY_GC_START ? "start" : "stop", generation, flags);
        log_end(&b);
    }
}

/* The agent's work at a collection's start or stop: called with what the collector passes
   (phase, info), or with anything a program passes the agent's entry by hand (accepted, never
   raises). */
static void agent_gc_work(PyObject *args) {
    PyObject *phase = NULL, *info = NULL;
    if (!PyArg_ParseTuple(args, "OO", &phase, &info)) {
        PyErr_Clear();
        return;
    }
    int start = PyUnicode_Check(phase) && PyUnicode_CompareWithASCIIString(phase, "start") == 0;
    int stop = !start && PyUnicode_Check(phase) && PyUnicode_CompareWithASCIIString(phase, "stop") == 0;
    PyErr_Clear();
    PyObject *gen = (start || stop) && PyDict_Check(info) ? PyDict_GetItemString(info, "generation") : NULL;
    long generation = gen && PyLong_Check(gen) ? PyLong_AsLong(gen) : -1;
    PyErr_Clear();
    if (generation < -1 || generation > GT_OLDEST_GENERATION) generation = -1;
    if (start) type_scan_at_collection((int)generation);
    if ((start || stop) && !g_final_collecting && (g_native || g_log_fd >= 0) && generation == GT_OLDEST_GENERATION)
        report_collection(start ? GROWTRACE_PY_GC_START : GROWTRACE_PY_GC_STOP, (uint32_t)generation, 0);
    /* A walk runs when a collection starts, not when it stops: its own objects, freed at once,
       go to CPython's free lists, and a full collection empties those before it stops (as
       gc.collect() does untraced). Walked after the stop, they would stay there, and a program
       that reads gc.get_count() right after gc.collect() would see its next list or tuple taken
       from a free list without counting as an allocation (CPython's test_gc.test_get_count). */
    if (start && !g_final_collecting && walk_is_due()) run_walk();
}

/* gc.callbacks, unchanged as the program sees it.

   The collector calls the entries of the list it made at start-up (L below): the module
   attribute gc.callbacks is only bound to that same list. The agent takes L for itself and
   gives the program another list U with L's entries, bound to gc.callbacks: L holds one entry,
   the forwarder (a C function whose `self` is U), and U what the program put in gc.callbacks.
   The forwarder does the agent's work, then calls U's entries as CPython 3.10 to 3.13 calls
   L's (invoke_gc_callback in gcmodule.c, Python/gc.c in 3.13):
   - in order, the length read again before each call, so that an entry appended by a
     callback during a collection is called in the same phase, and one removed is not;
   - each held (a new reference) across its call;
   - 3.10, 3.11: PyObject_CallFunction(cb, "sO", phase, info), a new str for each call;
     3.12, 3.13: PyObject_Vectorcall with one str for every call of the phase;
   - an exception goes to PyErr_WriteUnraisable(cb) (sys.unraisablehook: "Exception ignored
     in: <cb>"), and the next entry is called.
   So a program sees the same gc.callbacks (len 0 when it registered nothing), and its append,
   remove, clear, slice assignment, rebinding (the collector keeps the list it had) and
   callbacks behave as untraced. The agent holds no reference to U or L of its own: L holds the
   forwarder, the forwarder U, as the interpreter's own reference held L; at the interpreter's
   end (_PyGC_Fini) they go together, as L would have. */
static PyObject *g_gc_internal;  /* L while the forwarder is in it; borrowed (the interpreter holds it) */
static int g_forward_depth;       /* forwarder calls under way (a callback may give up the GIL) */
static int g_restore_pending;     /* give_back_gc_callbacks() came during a forward */
static int g_restore_scheduled;   /* restore_pending_call queued */
static PyObject *g_restore_gc;    /* the gc module, for the pending restore */

static PyObject *forward_gc_callbacks(PyObject *callbacks, PyObject *args, PyObject *kwargs);
static PyMethodDef g_forward_def = {"gc_callback", (PyCFunction)(void (*)(void))forward_gc_callbacks,
                                    METH_VARARGS | METH_KEYWORDS, NULL};

static int is_forwarder(PyObject *o) {
    return PyCFunction_Check(o) && ((PyCFunctionObject *)o)->m_ml == &g_forward_def;
}

static void call_each(PyObject *callbacks, PyObject *args, PyObject *kwargs) {
    PyObject *phase = PyTuple_GET_SIZE(args) == 2 ? PyTuple_GET_ITEM(args, 0) : NULL;
    PyObject *info = PyTuple_GET_SIZE(args) == 2 ? PyTuple_GET_ITEM(args, 1) : NULL;
    /* What the collector passes: (str, dict), no keywords. Anything else (a program calling the
       forwarder by hand through a reference to L taken before an attach) is passed on as is. */
    int from_collector = !kwargs && phase && PyUnicode_CheckExact(phase) && info && PyDict_CheckExact(info);
    const char *phase_s = from_collector ? PyUnicode_AsUTF8(phase) : NULL;
    if (!phase_s) { PyErr_Clear(); from_collector = 0; }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(callbacks); i++) {
        PyObject *cb = Py_NewRef(PyList_GET_ITEM(callbacks, i));
        PyObject *r;
        if (!from_collector) {
            r = PyObject_Call(cb, args, kwargs);
        } else {
#if PY_VERSION_HEX >= 0x030C0000
            PyObject *stack[] = {phase, info};
            r = PyObject_Vectorcall(cb, stack, 2, NULL);
#else
            r = PyObject_CallFunction(cb, "sO", phase_s, info);
#endif
        }
        if (!r) PyErr_WriteUnraisable(cb);
        else Py_DECREF(r);
        Py_DECREF(cb);
    }
}

static void restore_gc_callbacks(PyObject *gc_module);

static int restore_pending_call(void *arg) {
    (void)arg;
    g_restore_scheduled = 0;
    if (g_restore_pending && g_forward_depth == 0) {
        PyObject *gc_module = g_restore_gc;
        g_restore_gc = NULL;
        g_restore_pending = 0;
        restore_gc_callbacks(gc_module);
        Py_XDECREF(gc_module);
    }
    return 0; /* never raises into the program */
}

static PyObject *forward_gc_callbacks(PyObject *callbacks, PyObject *args, PyObject *kwargs) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb); /* none from the collector; a hand call's is kept */
    g_forward_depth++;
    agent_gc_work(args);
    PyErr_Clear();
    Py_INCREF(callbacks);
    if (PyList_Check(callbacks)) call_each(callbacks, args, kwargs);
    Py_DECREF(callbacks);
    g_forward_depth--;
    /* A detach that came while a callback of the program had given up the GIL: L is given back
       once no forward is under way, not now, or the collector, which goes on through L after
       the forwarder returns, would call those entries again. A pending call runs outside the
       collector's loop (at the next check of the eval loop of the main thread). */
    if (g_restore_pending && g_forward_depth == 0 && !g_restore_scheduled &&
        Py_AddPendingCall(restore_pending_call, NULL) == 0)
        g_restore_scheduled = 1;
    PyErr_Restore(type, value, tb);
    Py_RETURN_NONE;
}

/* The collector's own list: a new instance of the gc module (its exec step binds `callbacks`
   to it, as at start-up) tells it even when the program rebound gc.callbacks before an attach.
   Else gc.callbacks. New reference, or NULL. */
static PyObject *collector_callbacks(PyObject *gc_module) {
    PyObject *found = NULL;
    PyModuleDef *def = PyModule_GetDef(gc_module);
    PyObject *spec = def ? PyObject_GetAttrString(gc_module, "__spec__") : NULL;
    PyObject *fresh = spec && spec != Py_None ? PyModule_FromDefAndSpec(def, spec) : NULL;
    if (fresh && PyModule_ExecDef(fresh, def) == 0) found = PyObject_GetAttrString(fresh, "callbacks");
    /* Its functions hold it (their self): emptied, it goes now, not at the program's next
       collection (some 20 objects more in what that collection reports it freed). */
    if (fresh) PyDict_Clear(PyModule_GetDict(fresh));
    Py_XDECREF(fresh);
    Py_XDECREF(spec);
    PyErr_Clear();
    if (!found) found = PyObject_GetAttrString(gc_module, "callbacks");
    PyErr_Clear();
    if (found && !PyList_CheckExact(found)) Py_CLEAR(found);
    return found;
}

/* take_gc_callbacks(gc): puts the forwarder in the collector's list, the program's entries in
   a list of their own bound to gc.callbacks. Returns whether the agent is in place. */
PyObject *take_gc_callbacks(PyObject *m, PyObject *gc_module) {
    (void)m;
    if (g_gc_internal) {
        /* Still in place: a detach's restore was waiting; this install keeps the lists. */
        g_restore_pending = 0;
        Py_CLEAR(g_restore_gc);
        Py_RETURN_TRUE;
    }
    PyObject *internal = collector_callbacks(gc_module);
    if (!internal) Py_RETURN_FALSE;
    PyObject *visible = PyObject_GetAttrString(gc_module, "callbacks");
    PyErr_Clear();
    PyObject *user = PyList_GetSlice(internal, 0, PyList_GET_SIZE(internal));
    PyObject *forwarder = user ? PyCFunction_New(&g_forward_def, user) : NULL;
    PyObject *only = forwarder ? PyList_New(1) : NULL;
    int ok = only != NULL;
    if (ok) {
        PyList_SET_ITEM(only, 0, Py_NewRef(forwarder));
        ok = PyList_SetSlice(internal, 0, PyList_GET_SIZE(internal), only) == 0;
    }
    /* The program sees its entries where it looks: gc.callbacks, when that is the collector's
       list (always, unless it rebound it; then its own list stays bound and the collector's
       entries, which it no longer saw, are still called). */
    if (ok && visible == internal && PyObject_SetAttrString(gc_module, "callbacks", user) < 0) {
        PyList_SetSlice(internal, 0, PyList_GET_SIZE(internal), user); /* as it was */
        ok = 0;
    }
    if (ok) {
        g_gc_internal = internal;
        /* Out of the collector's lists, so that gc.get_objects() and gc.get_referrers() show a
           program the one list of its callbacks it would see untraced (U, with its entries),
           not L nor the forwarder. Neither can ever be garbage while the interpreter holds L,
           so neither needs to be tracked; L is tracked again when it is given back. */
        PyObject_GC_UnTrack(forwarder);
        PyObject_GC_UnTrack(internal);
    }
    PyErr_Clear();
    Py_XDECREF(only);
    Py_XDECREF(forwarder);
    Py_XDECREF(user);
    Py_XDECREF(visible);
    Py_DECREF(internal); /* the interpreter holds it */
    return PyBool_FromLong(ok);
}

/* Puts the program's entries back in the collector's list and binds gc.callbacks to it again
   if the program left it bound to the agent's copy. Entries a program added to L itself
   (through a reference taken before an attach) stay, after the others. */
static void restore_gc_callbacks(PyObject *gc_module) {
    PyObject *internal = g_gc_internal;
    g_gc_internal = NULL;
    if (!internal) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (!PyObject_GC_IsTracked(internal)) PyObject_GC_Track(internal);
    PyObject *user = NULL;
    PyObject *extra = PyList_New(0);
    for (Py_ssize_t i = 0; extra && i < PyList_GET_SIZE(internal); i++) {
        PyObject *o = PyList_GET_ITEM(internal, i);
        if (is_forwarder(o) && !user) user = Py_XNewRef(PyCFunction_GET_SELF(o));
        else if (PyList_Append(extra, o) < 0) Py_CLEAR(extra);
    }
    if (user && extra && PyList_Check(user)) {
        PyObject *entries = PySequence_List(user);
        if (entries && PyList_SetSlice(entries, PyList_GET_SIZE(entries), PyList_GET_SIZE(entries), extra) == 0 &&
            PyList_SetSlice(internal, 0, PyList_GET_SIZE(internal), entries) == 0 && gc_module) {
            PyObject *visible = PyObject_GetAttrString(gc_module, "callbacks");
            if (visible == user) PyObject_SetAttrString(gc_module, "callbacks", internal);
            Py_XDECREF(visible);
        }
        Py_XDECREF(entries);
    }
    /* No forwarder in L: the program took it out through such a reference; nothing to give back. */
    Py_XDECREF(user);
    Py_XDECREF(extra);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

/* give_back_gc_callbacks(gc): at detach. */
PyObject *give_back_gc_callbacks(PyObject *m, PyObject *gc_module) {
    (void)m;
    if (!g_gc_internal) Py_RETURN_NONE;
    if (g_forward_depth > 0) {
        g_restore_pending = 1;
        Py_XSETREF(g_restore_gc, Py_NewRef(gc_module));
        Py_RETURN_NONE;
    }
    restore_gc_callbacks(gc_module);
    Py_RETURN_NONE;
}

void collect_at_shutdown(void) {
    if ((g_native || g_log_fd >= 0) && PyGC_IsEnabled()) {
        g_final_collecting = 1;
        report_collection(GROWTRACE_PY_GC_START, GT_OLDEST_GENERATION, GROWTRACE_PY_GC_AT_SHUTDOWN);
        PyGC_Collect();
        report_collection(GROWTRACE_PY_GC_STOP, GT_OLDEST_GENERATION, GROWTRACE_PY_GC_AT_SHUTDOWN);
        g_final_collecting = 0;
    }
}
