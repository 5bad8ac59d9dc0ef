/* Describing objects without running the program's code: a class's name read from its own
 * storage, and a cache key as the types of its arguments (typing aliases spelled out), never
 * their values. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "describe.h"

/* The PyHeapTypeObject behind a class, or NULL. Py_TPFLAGS_HEAPTYPE alone is no proof: Cython
   sets it on its static types while PyType_Ready runs, and a heap type's fields would then be
   read from whatever follows the static type in memory. A real heap type (type(),
   PyType_FromSpec*) has its slot tables inside itself; a type built by hand that does not is
   left unnamed rather than misread. */
PyHeapTypeObject *heap_type_of(PyTypeObject *tp) {
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE)) return NULL;
    PyHeapTypeObject *ht = (PyHeapTypeObject *)tp;
    return tp->tp_as_number == &ht->as_number ? ht : NULL;
}

/* tp_name, which a type not made ready yet may lack. */
const char *type_name_of(PyTypeObject *tp) { return tp->tp_name ? tp->tp_name : "?"; }

/* A heap type's __module__ (from its own dict) and qualified name, NULL where unset or not str. */
const char *heap_module_of(PyHeapTypeObject *ht) {
    PyObject *dict = ht ? ht->ht_type.tp_dict : NULL;
    PyObject *mod = dict && PyDict_Check(dict) ? PyDict_GetItemString(dict, "__module__") : NULL;
    const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
    if (!m) PyErr_Clear();
    return m;
}

const char *heap_qualname_of(PyHeapTypeObject *ht) {
    PyObject *qualname = ht ? ht->ht_qualname : NULL;
    const char *q = qualname && PyUnicode_Check(qualname) ? PyUnicode_AsUTF8(qualname) : NULL;
    if (!q) PyErr_Clear();
    return q;
}

/* "module.qualname" of a class, read from its own storage (no descriptors, no __getattr__). */
void put_type_name(Buf *b, PyTypeObject *tp) {
    PyHeapTypeObject *ht = heap_type_of(tp);
    if (ht) {
        const char *m = heap_module_of(ht);
        if (m && strcmp(m, "builtins") != 0) {
            buf_puts(b, m);
            buf_puts(b, ".");
        }
        const char *q = heap_qualname_of(ht);
        buf_puts(b, q ? q : type_name_of(tp));
    } else {
        buf_puts(b, type_name_of(tp)); /* "module.name" already, or a builtin's bare name */
    }
    PyErr_Clear();
}

static int module_is(PyTypeObject *tp, const char *module) {
    const char *m = heap_module_of(heap_type_of(tp));
    return m && strcmp(m, module) == 0;
}

/* Generic attribute lookup that ignores a class's __getattr__/__getattribute__ overrides. */
static PyObject *plain_attr(PyObject *o, const char *name) {
    PyObject *n = PyUnicode_InternFromString(name);
    if (!n) { PyErr_Clear(); return NULL; }
    PyObject *v = PyObject_GenericGetAttr(o, n);
    Py_DECREF(n);
    if (!v) PyErr_Clear();
    return v;
}

static void describe(KeyDesc *k, PyObject *o, int depth);

static void describe_seq(KeyDesc *k, PyObject *items, int depth, const char *open, const char *close) {
    buf_puts(&k->text, open);
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) buf_puts(&k->text, ", ");
        if (i == 6) { buf_puts(&k->text, "..."); break; }
        describe(k, PyTuple_GET_ITEM(items, i), depth + 1);
    }
    buf_puts(&k->text, close);
}

static void describe(KeyDesc *k, PyObject *o, int depth) {
    Buf *b = &k->text;
    if (depth > 3 || b->overflow) { buf_puts(b, "..."); return; }
    PyTypeObject *tp = Py_TYPE(o);
    if (PyType_Check(o)) {
        if (k->ntypes < MAX_KEY_TYPES) k->types[k->ntypes++] = (uintptr_t)o;
        put_type_name(b, (PyTypeObject *)o);
        return;
    }
    if (PyTuple_CheckExact(o)) {
        describe_seq(k, o, depth, "(", PyTuple_GET_SIZE(o) == 1 ? ",)" : ")");
        return;
    }
    /* typing aliases (typing._GenericAlias, _UnionGenericAlias, ...) and
       types.GenericAlias / types.UnionType: origin[args] */
    const char *tn = type_name_of(tp);
    if (module_is(tp, "typing") || strcmp(tn, "types.GenericAlias") == 0 ||
        strcmp(tn, "types.UnionType") == 0) {
        PyObject *origin = plain_attr(o, "__origin__");
        PyObject *args = plain_attr(o, "__args__");
        if (origin) {
            PyObject *special = NULL;
            if (!PyType_Check(origin) && module_is(Py_TYPE(origin), "typing") &&
                (special = plain_attr(origin, "_name")) && PyUnicode_Check(special)) {
                buf_puts(b, "typing.");
                const char *s = PyUnicode_AsUTF8(special);
                buf_puts(b, s ? s : "?");
            } else if (PyType_Check(origin)) {
                put_type_name(b, (PyTypeObject *)origin);
            } else {
                put_type_name(b, Py_TYPE(origin));
            }
            Py_XDECREF(special);
        } else {
            buf_puts(b, strcmp(tn, "types.UnionType") == 0 ? "Union" : "?");
        }
        if (args && PyTuple_Check(args)) describe_seq(k, args, depth, "[", "]");
        Py_XDECREF(origin);
        Py_XDECREF(args);
        PyErr_Clear();
        return;
    }
    /* anything else: its type only (no values: cost and privacy) */
    put_type_name(b, tp);
}

void describe_key(KeyDesc *k, PyObject *const *args, size_t nargs, PyObject *kwnames) {
    Buf *b = &k->text;
    buf_puts(b, "(");
    for (size_t i = 0; i < nargs; i++) {
        if (i) buf_puts(b, ", ");
        if (i == 8) { buf_puts(b, "..."); break; }
        describe(k, args[i], 1);
    }
    if (nargs == 1 && !kwnames) buf_puts(b, ",");
    if (kwnames) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nk && i < 8; i++) {
            if (nargs || i) buf_puts(b, ", ");
            const char *kn = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
            buf_puts(b, kn ? kn : "?");
            buf_puts(b, "=");
            describe(k, args[nargs + i], 1);
        }
    }
    buf_puts(b, ")");
    PyErr_Clear();
}
