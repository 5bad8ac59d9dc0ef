/* New classes found at collections, for an interpreter whose PyType_Ready the preload library
 * does not hook (static libpython): at the start of each collection the heap types in
 * generation 0, created since the previous one, are reported (type_created), and once more when
 * the agent is detached or the program begins to exit. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "describe.h"
#include "sinks.h"
#include "type_scan.h"

static PyObject *g_get_objects; /* gc.get_objects */
static int g_scan_types;        /* no PyType_Ready hook: new classes are found at collections */

static void emit_type(PyTypeObject *tp, uint32_t source) {
    char mod_s[512], qn_s[512], meta_s[512];
    Buf mod = {mod_s, 0, sizeof mod_s, 0}, qn = {qn_s, 0, sizeof qn_s, 0},
        meta = {meta_s, 0, sizeof meta_s, 0};
    mod_s[0] = qn_s[0] = meta_s[0] = '\0';
    PyHeapTypeObject *ht = heap_type_of(tp);
    if (!ht) return; /* not a heap type whose fields can be read: left out */
    const char *ms = heap_module_of(ht);
    buf_puts(&mod, ms ? ms : "");
    const char *q = heap_qualname_of(ht);
    buf_puts(&qn, q ? q : type_name_of(tp));
    put_type_name(&meta, Py_TYPE(tp));
    PyErr_Clear();
    g_counts[3]++;
    if (g_native) {
        growtrace_py_type_info info = {0};
        info.size = sizeof info;
        info.source = source;
        info.address = (uintptr_t)tp;
        info.module = mod.p; info.module_len = mod.len;
        info.qualname = qn.p; info.qualname_len = qn.len;
        info.metaclass = meta.p; info.metaclass_len = meta.len;
        g_native->type_created(&info);
    }
    if (g_log_fd >= 0) {
        char store[2048];
        Buf b = {store, 0, sizeof store, 0};
        store[0] = '\0';
        log_begin(&b, "type_create");
        buf_printf(&b, ",\"source\":%u,\"address\":%llu,\"module\":", source,
                   (unsigned long long)(uintptr_t)tp);
        buf_json(&b, mod.p, mod.len);
        buf_puts(&b, ",\"qualname\":");
        buf_json(&b, qn.p, qn.len);
        buf_puts(&b, ",\"metaclass\":");
        buf_json(&b, meta.p, meta.len);
        log_end(&b);
    }
}

/* A class is tracked by the collector as soon as type() allocates it, and only later made
   ready; a collection that the allocations in between set off finds it in generation 0 not
   ready yet, and then promotes it. Its address is kept (never a reference: the program's
   objects are not kept alive) with the generation it was promoted to, and at the next scan,
   before any other collection could have moved it, that generation is looked through for it.
   An address not found there again is dropped. */
#define GT_PENDING_TYPES 64
typedef struct { uintptr_t address; int generation; } PendingType;
static PendingType g_pending[GT_PENDING_TYPES];
static int g_n_pending;

static int is_heap_type(PyObject *o) {
    return PyType_Check(o) && (((PyTypeObject *)o)->tp_flags & Py_TPFLAGS_HEAPTYPE);
}

/* Where the survivors of a collection of `collected` that were in `generation` go. */
static int promoted_to(int generation, int collected) {
    if (collected < 0 || generation > collected) return generation; /* not a collection, or not in it */
    return collected < GT_OLDEST_GENERATION ? collected + 1 : GT_OLDEST_GENERATION;
}

static void remember_not_ready(uintptr_t address, int generation, int collected) {
    if (g_n_pending == GT_PENDING_TYPES) return;
    g_pending[g_n_pending].address = address;
    g_pending[g_n_pending++].generation = promoted_to(generation, collected);
}

/* Reports the classes of `pending` in `generation` that are ready now; keeps those still not. */
static void scan_pending(const PendingType *pending, int n, int generation, int collected) {
    PyObject *objs = PyObject_CallFunction(g_get_objects, "i", generation);
    if (!objs) { PyErr_Clear(); return; }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(objs); i++) {
        PyObject *o = PyList_GET_ITEM(objs, i);
        if (!is_heap_type(o)) continue;
        for (int p = 0; p < n; p++) {
            if (pending[p].generation != generation || pending[p].address != (uintptr_t)o) continue;
            if (((PyTypeObject *)o)->tp_flags & Py_TPFLAGS_READY)
                emit_type((PyTypeObject *)o, GROWTRACE_PY_TYPE_FROM_GC_SCAN);
            else
                remember_not_ready((uintptr_t)o, generation, collected);
            break;
        }
    }
    Py_DECREF(objs);
}

/* Reports the heap types in GC generation 0, and the ones an earlier scan found not ready.
   `collected`: the generation whose collection is starting, -1 when none is. */
static void scan_types(int collected) {
    if (!g_get_objects) return;
    PendingType pending[GT_PENDING_TYPES];
    int n = g_n_pending;
    memcpy(pending, g_pending, sizeof pending[0] * (size_t)n);
    g_n_pending = 0;
    for (int generation = 1; generation <= GT_OLDEST_GENERATION; generation++) {
        for (int p = 0; p < n; p++) {
            if (pending[p].generation == generation) {
                scan_pending(pending, n, generation, collected);
                break;
            }
        }
    }
    PyObject *objs = PyObject_CallFunction(g_get_objects, "i", 0);
    if (!objs) { PyErr_Clear(); return; }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(objs); i++) {
        PyObject *o = PyList_GET_ITEM(objs, i);
        if (!is_heap_type(o)) continue;
        if (((PyTypeObject *)o)->tp_flags & Py_TPFLAGS_READY)
            emit_type((PyTypeObject *)o, GROWTRACE_PY_TYPE_FROM_GC_SCAN);
        else
            remember_not_ready((uintptr_t)o, 0, collected);
    }
    Py_DECREF(objs);
}

PyObject *scan_young_types(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    scan_types(-1);
    Py_RETURN_NONE;
}

/* The classes made since the last collection are only seen at the next one: the agent scans
   once more when it is detached or the program begins to exit (type_scan_final). After that
   final scan, collections during the interpreter's shutdown report nothing twice. */
static int g_type_scan_final_done;

PyObject *type_scan_final(PyObject *m, PyObject *noargs) {
    if (g_type_scan_final_done) Py_RETURN_NONE;
    g_type_scan_final_done = 1;
    return scan_young_types(m, noargs);
}

PyObject *enable_type_scan(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    g_scan_types = 1;
    Py_RETURN_NONE;
}

void type_scan_start(PyObject *get_objects) {
    Py_XSETREF(g_get_objects, Py_NewRef(get_objects));
    g_type_scan_final_done = 0;
}

void type_scan_at_collection(int collected) {
    if (g_scan_types && !g_type_scan_final_done) scan_types(collected);
}
