/* What a container walk reports: the large containers of the whole heap (for the heap pass),
 * and each container the walk measured, with the blocks that hold its table and its newest
 * entries, to the library (container_walk) or the file sink. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "containers.h"
#include "sinks.h"

/* Walks reported so far (stats()["walks"]): test programs wait for the walks their test needs
   rather than for a time that a loaded machine stretches. */
unsigned long long g_walks_reported;

/* The start of the heap block holding an object: CPython puts the collector's header (16
   bytes) and, for classes with managed dicts or weak references (3.11+), two more pointers
   before it. */
static uintptr_t block_of(PyObject *o) {
    PyTypeObject *t = Py_TYPE(o);
    uintptr_t a = (uintptr_t)o;
    if (PyType_IS_GC(t)) a -= 16;
#if PY_VERSION_HEX >= 0x030C0000
    if (t->tp_flags & (Py_TPFLAGS_MANAGED_DICT | Py_TPFLAGS_MANAGED_WEAKREF)) a -= 2 * sizeof(PyObject *);
#elif PY_VERSION_HEX >= 0x030B0000
    if (t->tp_flags & Py_TPFLAGS_MANAGED_DICT) a -= 2 * sizeof(PyObject *);
#endif
    return a;
}

/* The start of _collections' deque object, private to that module but the same from 3.10 to
   3.13: its entries are in a linked list of blocks of 64, and the rightmost block was allocated
   by the append (or insert) that needed it. */
typedef struct {
    PyObject_VAR_HEAD
    void *leftblock;
    void *rightblock;
} deque_head;

/* The block holding a container's slots: what an insertion that outgrows it (re)allocates.
   `kind` is the agent's (a deque: an instance of collections.deque or of a subclass). */
static uintptr_t table_of(PyObject *o, unsigned int kind) {
    if (PyDict_Check(o)) return (uintptr_t)((PyDictObject *)o)->ma_keys;
    if (PyList_Check(o)) return (uintptr_t)((PyListObject *)o)->ob_item;
    if (PyAnySet_Check(o)) {
        PySetObject *s = (PySetObject *)o;
        return s->table == s->smalltable ? 0 : (uintptr_t)s->table;
    }
    if (kind == GROWTRACE_PY_CONTAINER_DEQUE) return (uintptr_t)((deque_head *)o)->rightblock;
    return 0;
}

/* large_containers(objects, deque_type, floor): the exact dicts, lists, sets and deques of the
   list (gc.get_objects()) with at least `floor` entries. In C: the heap pass looks at every
   object the collector tracks, hundreds of thousands in a large program. */
PyObject *large_containers(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *objects, *deque_type;
    Py_ssize_t floor;
    if (!PyArg_ParseTuple(args, "O!On", &PyList_Type, &objects, &deque_type, &floor)) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(objects); i++) {
        PyObject *o = PyList_GET_ITEM(objects, i);
        PyTypeObject *t = Py_TYPE(o);
        Py_ssize_t n = -1;
        if (t == &PyDict_Type) n = PyDict_GET_SIZE(o);
        else if (t == &PyList_Type) n = PyList_GET_SIZE(o);
        else if (t == &PySet_Type) n = PySet_GET_SIZE(o);
        else if ((PyObject *)t == deque_type) n = Py_SIZE(o); /* a deque's ob_size is its length */
        if (n >= floor && PyList_Append(out, o) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* report_containers(flags, walk_ns, items): items are tuples (container_id, kind, entries,
   container, name, owner_type, key_types, value_types, newest entries (tuple)). */
PyObject *report_containers(PyObject *m, PyObject *args) {
    (void)m;
    unsigned int flags;
    unsigned long long walk_ns;
    PyObject *items;
    if (!PyArg_ParseTuple(args, "IKO!", &flags, &walk_ns, &PyList_Type, &items)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    void (*container_walk)(uint32_t, uint64_t, const growtrace_py_container *, size_t) =
        native_has(offsetof(growtrace_py_api, container_walk)) ? g_native->container_walk : NULL;
    g_walks_reported++;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        unsigned long long cid, entries;
        unsigned int kind;
        PyObject *container, *name, *owner, *keys, *values, *newest;
        if (!PyArg_ParseTuple(it, "KIKOUUUUO!", &cid, &kind, &entries, &container, &name, &owner, &keys,
                              &values, &PyTuple_Type, &newest))
            return NULL;
        uintptr_t blocks[16];
        size_t nblocks = 0;
        for (Py_ssize_t e = 0; e < PyTuple_GET_SIZE(newest) && nblocks < 16; e++)
            blocks[nblocks++] = block_of(PyTuple_GET_ITEM(newest, e));
        Py_ssize_t ln, lo, lk, lv;
        growtrace_py_container c = {0};
        c.size = sizeof c;
        c.kind = kind;
        c.container_id = cid;
        c.entries = entries;
        c.table = table_of(container, kind);
        c.entry_blocks = blocks;
        c.entry_block_count = nblocks;
        c.name = utf8_or_empty(name, &ln);
        c.name_len = (size_t)ln;
        c.owner_type = utf8_or_empty(owner, &lo);
        c.owner_type_len = (size_t)lo;
        c.key_types = utf8_or_empty(keys, &lk);
        c.key_types_len = (size_t)lk;
        c.value_types = utf8_or_empty(values, &lv);
        c.value_types_len = (size_t)lv;
        if (container_walk) {
            container_walk(flags, walk_ns, &c, 1);
        } else if (g_log_fd >= 0) {
            char line[1024];
            Buf b = {line, 0, sizeof line, 0};
            log_begin(&b, "container");
            buf_printf(&b, ",\"id\":%llu,\"kind\":%u,\"entries\":%llu,\"flags\":%u,\"table\":%d,\"name\":", cid,
                       kind, entries, flags, c.table != 0);
            buf_json(&b, c.name, c.name_len);
            buf_puts(&b, ",\"owner\":");
            buf_json(&b, c.owner_type, c.owner_type_len);
            log_end(&b);
        }
    }
    PyErr_Clear();
    Py_RETURN_NONE;
}
