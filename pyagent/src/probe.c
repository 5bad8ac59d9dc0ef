/* The probe: a callable that stands in for the user function inside a
 * functools._lru_cache_wrapper. The wrapper only calls its function on a miss, so every call
 * of a probe is a cache miss that is about to become an insertion: the probe reports
 * MISS_BEGIN (with a key description), calls the real function, reports STORED/RAISED. Being
 * C, it adds no Python frame: tracebacks and stacks look exactly as without it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "describe.h"
#include "probe.h"
#include "sinks.h"

static uint64_t g_next_cache_id = 1;

static void emit_miss(ProbeObject *p, uint32_t phase, uint64_t seq, uint64_t entries_before,
                      KeyDesc *key, PyObject *result) {
    const char *vt = "";
    Buf vbuf = {NULL, 0, 0, 0};
    char vstore[256];
    if (phase == GROWTRACE_PY_MISS_STORED && result) {
        vbuf.p = vstore; vbuf.cap = sizeof vstore; vstore[0] = '\0';
        put_type_name(&vbuf, Py_TYPE(result));
        vt = vstore;
    }
    if (g_native) {
        growtrace_py_cache_insert ins = {0};
        ins.size = sizeof ins;
        ins.phase = phase;
        ins.cache_id = p->cache_id;
        ins.insert_seq = seq;
        ins.entries_before = entries_before;
        if (key) {
            ins.key_desc = key->text.p; ins.key_desc_len = key->text.len;
            ins.key_types = key->types; ins.key_type_count = key->ntypes;
        }
        ins.value_type = vt; ins.value_type_len = strlen(vt);
        g_native->cache_insert(&ins);
    }
    if (g_log_fd >= 0) {
        char store[8192];
        Buf b = {store, 0, sizeof store, 0};
        store[0] = '\0';
        log_begin(&b, phase == GROWTRACE_PY_MISS_BEGIN ? "cache_miss_begin" : "cache_miss_end");
        buf_printf(&b, ",\"cache_id\":%llu,\"seq\":%llu,\"entries_before\":%llu",
                   (unsigned long long)p->cache_id, (unsigned long long)seq,
                   (unsigned long long)entries_before);
        if (key) {
            buf_puts(&b, ",\"key\":");
            buf_json(&b, key->text.p, key->text.len);
            buf_puts(&b, ",\"key_types\":[");
            for (size_t i = 0; i < key->ntypes; i++)
                buf_printf(&b, "%s%llu", i ? "," : "", (unsigned long long)key->types[i]);
            buf_puts(&b, "]");
            log_python_stack(&b, "stack");
        } else {
            buf_printf(&b, ",\"status\":\"%s\",\"value_type\":",
                       phase == GROWTRACE_PY_MISS_STORED ? "stored" : "raised");
            buf_json(&b, vt, strlen(vt));
        }
        log_end(&b);
    }
}

static PyObject *probe_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    ProbeObject *p = (ProbeObject *)self;
    if (!g_native && g_log_fd < 0)
        return PyObject_Vectorcall(p->func, args, nargsf, kwnames);

    /* Announce the cache at its first miss: by then the decorated name is bound. */
    if (p->on_first_miss) {
        PyObject *cb = p->on_first_miss;
        p->on_first_miss = NULL;
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        PyObject *r = PyObject_CallOneArg(cb, self);
        if (!r) PyErr_Clear();
        Py_XDECREF(r);
        Py_DECREF(cb);
        PyErr_Restore(exc_type, exc_value, exc_tb);
    }

    uint64_t seq = ++p->seq;
    uint64_t before = p->cache_dict ? (uint64_t)PyDict_GET_SIZE(p->cache_dict) : 0;
    {
        char text[KEY_DESC_CAP];
        KeyDesc key = {{text, 0, sizeof text, 0}, {0}, 0};
        text[0] = '\0';
        describe_key(&key, args, PyVectorcall_NARGS(nargsf), kwnames);
        emit_miss(p, GROWTRACE_PY_MISS_BEGIN, seq, before, &key, NULL);
        g_counts[1]++;
    }

    PyObject *result = PyObject_Vectorcall(p->func, args, nargsf, kwnames);

    if (result) {
        emit_miss(p, GROWTRACE_PY_MISS_STORED, seq, before, NULL, result);
    } else {
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        emit_miss(p, GROWTRACE_PY_MISS_RAISED, seq, before, NULL, NULL);
        PyErr_Restore(exc_type, exc_value, exc_tb);
    }
    g_counts[2]++;
    return result;
}

static PyObject *probe_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    return PyVectorcall_Call(self, args, kwargs);
}

static int probe_traverse(ProbeObject *p, visitproc visit, void *arg) {
    Py_VISIT(p->func);
    Py_VISIT(p->on_first_miss);
    return 0;
}
static int probe_clear(ProbeObject *p) {
    Py_CLEAR(p->func);
    Py_CLEAR(p->on_first_miss);
    p->cache_dict = NULL;
    return 0;
}
static void probe_dealloc(ProbeObject *p) {
    PyObject_GC_UnTrack(p);
    probe_clear(p);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

/* Attributes visible to the Python half (the wrapper never exposes its func, so the
   program cannot reach these). */
static PyObject *probe_get_cache_id(ProbeObject *p, void *c) {
    (void)c;
    return PyLong_FromUnsignedLongLong(p->cache_id);
}
static PyObject *probe_get_func(ProbeObject *p, void *c) {
    (void)c;
    return Py_NewRef(p->func ? p->func : Py_None);
}
static PyGetSetDef probe_getset[] = {
    {"cache_id", (getter)probe_get_cache_id, NULL, NULL, NULL},
    {"func", (getter)probe_get_func, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ProbeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_growtrace_agent.Probe",
    .tp_basicsize = sizeof(ProbeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(ProbeObject, vectorcall),
    .tp_call = probe_call,
    .tp_traverse = (traverseproc)probe_traverse,
    .tp_clear = (inquiry)probe_clear,
    .tp_dealloc = (destructor)probe_dealloc,
    .tp_getset = probe_getset,
};

/* make_probe(func, on_first_miss) -> Probe */
PyObject *make_probe(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *func, *on_first_miss;
    if (!PyArg_ParseTuple(args, "OO", &func, &on_first_miss)) return NULL;
    ProbeObject *p = PyObject_GC_New(ProbeObject, &ProbeType);
    if (!p) return NULL;
    p->func = Py_NewRef(func);
    p->on_first_miss = on_first_miss == Py_None ? NULL : Py_NewRef(on_first_miss);
    p->cache_dict = NULL;
    p->cache_id = g_next_cache_id++;
    p->seq = 0;
    p->vectorcall = probe_vectorcall;
    PyObject_GC_Track(p);
    return (PyObject *)p;
}

/* attach_probe(probe, cache_dict): the dict is only known once the wrapper exists. */
PyObject *attach_probe(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *probe, *dict;
    if (!PyArg_ParseTuple(args, "O!O!", &ProbeType, &probe, &PyDict_Type, &dict)) return NULL;
    ((ProbeObject *)probe)->cache_dict = dict; /* borrowed, see ProbeObject */
    Py_RETURN_NONE;
}

PyObject *new_cache_id(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    return PyLong_FromUnsignedLongLong(g_next_cache_id++);
}
