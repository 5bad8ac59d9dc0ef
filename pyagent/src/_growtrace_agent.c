/* _growtrace_agent: the C half of growtrace's CPython agent (CPython 3.10 to 3.13; built once
 * per version, against that version's headers).
 *
 * - Probe: a callable that stands in for the user function inside a
 *   functools._lru_cache_wrapper. The wrapper only calls its function on a miss, so every
 *   call of a probe is a cache miss that is about to become an insertion: the probe reports
 *   MISS_BEGIN (with a key description), calls the real function, reports STORED/RAISED.
 *   Being C, it adds no Python frame: tracebacks and stacks look exactly as without it.
 * - Collections: one callable in the collector's own list of callbacks (the program's
 *   gc.callbacks is another list, see "gc.callbacks, unchanged as the program sees it" below)
 *   that reports the start and stop of full collections and, where the library does not hook
 *   PyType_Ready, at the start of each collection, the heap types in generation 0 (= created
 *   since the previous collection). At the shutdown mark the agent runs one full collection
 *   itself.
 * - Sinks: the preload library's API (growtrace_py_get_api, see growtrace_py_api.h) when
 *   present, else JSON lines to $GROWTRACE_PYAGENT_LOG (for tests), else nothing.
 *
 * The Python half (pyagent/startup/growtrace-agent.py) patches functools.lru_cache and
 * resolves names. Built once per CPython version by pyagent/CMakeLists.txt.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "contracts/growtrace_py_api.h"
#include "young_count.h"

#if PY_VERSION_HEX < 0x030A0000
#error "_growtrace_agent needs CPython 3.10 or newer (the build only asks for versions with a layout)"
#endif

/* The name tracebacks show for a code object: its qualified name where it has one (3.11+). */
#if PY_VERSION_HEX >= 0x030B0000
#define GT_CODE_NAME(code) ((code)->co_qualname)
#else
#define GT_CODE_NAME(code) ((code)->co_name)
#endif

/* ------------------------------------------------------------------------------------ */
/* Sinks                                                                                 */

static const growtrace_py_api *g_native;  /* preload library, or NULL */
static int g_log_fd = -1;                 /* JSON lines file, or -1 */
static uint64_t g_next_cache_id = 1;
static unsigned long long g_counts[4];    /* creates, begins, ends, types: for stats() */

typedef struct {
    char *p;
    size_t len, cap;
    int overflow;
} Buf;

static void buf_putn(Buf *b, const char *s, size_t n) {
    if (b->len + n >= b->cap) {
        n = b->len < b->cap - 1 ? b->cap - 1 - b->len : 0;
        b->overflow = 1;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
static void buf_puts(Buf *b, const char *s) { buf_putn(b, s, strlen(s)); }
static void buf_printf(Buf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) buf_putn(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
/* JSON string literal */
static void buf_json(Buf *b, const char *s, size_t n) {
    buf_putn(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            buf_putn(b, e, 2);
        } else if (c < 0x20) {
            buf_printf(b, "\\u%04x", c);
        } else {
            buf_putn(b, (const char *)&c, 1);
        }
    }
    buf_putn(b, "\"", 1);
}

static void log_begin(Buf *b, const char *kind) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    buf_printf(b, "{\"kind\":\"%s\",\"ns\":%lld,\"tid\":%ld", kind,
               (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, (long)syscall(SYS_gettid));
}
static void log_end(Buf *b) {
    buf_puts(b, "}\n");
    if (b->overflow) { /* keep the line valid JSON: truncated records are dropped */
        return;
    }
    /* O_APPEND + one write per line: lines from threads and forked children never mix */
    ssize_t r = write(g_log_fd, b->p, b->len);
    (void)r;
}

/* The current Python stack as a JSON array of "file:line:function" (file sink only). */
static void log_python_stack(Buf *b, const char *field) {
    buf_printf(b, ",\"%s\":[", field);
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    Py_XINCREF(f);
    int depth = 0;
    while (f != NULL && depth < 32) {
        PyCodeObject *code = PyFrame_GetCode(f);
        const char *file = PyUnicode_AsUTF8(code->co_filename);
        const char *name = PyUnicode_AsUTF8(GT_CODE_NAME(code));
        char tmp[64];
        if (depth) buf_puts(b, ",");
        Buf one = {malloc(1024), 0, 1024, 0};
        if (one.p) {
            one.p[0] = '\0';
            buf_puts(&one, file ? file : "?");
            snprintf(tmp, sizeof tmp, ":%d:", PyFrame_GetLineNumber(f));
            buf_puts(&one, tmp);
            buf_puts(&one, name ? name : "?");
            buf_json(b, one.p, one.len);
            free(one.p);
        }
        Py_DECREF(code);
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
        depth++;
    }
    Py_XDECREF(f);
    PyErr_Clear(); /* PyUnicode_AsUTF8 can fail on lone surrogates */
    buf_puts(b, "]");
}

/* ------------------------------------------------------------------------------------ */
/* Describing objects without running user code                                          */

#define MAX_KEY_TYPES 16
#define KEY_DESC_CAP 512

typedef struct {
    Buf text;
    uintptr_t types[MAX_KEY_TYPES];
    size_t ntypes;
} KeyDesc;

/* The PyHeapTypeObject behind a class, or NULL. Py_TPFLAGS_HEAPTYPE alone is no proof: Cython
   sets it on its static types while PyType_Ready runs, and a heap type's fields would then be
   read from whatever follows the static type in memory. A real heap type (type(),
   PyType_FromSpec*) has its slot tables inside itself; a type built by hand that does not is
   left unnamed rather than misread. */
static PyHeapTypeObject *heap_type_of(PyTypeObject *tp) {
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE)) return NULL;
    PyHeapTypeObject *ht = (PyHeapTypeObject *)tp;
    return tp->tp_as_number == &ht->as_number ? ht : NULL;
}

/* tp_name, which a type not made ready yet may lack. */
static const char *type_name_of(PyTypeObject *tp) { return tp->tp_name ? tp->tp_name : "?"; }

/* A heap type's __module__ (from its own dict) and qualified name, NULL where unset or not str. */
static const char *heap_module_of(PyHeapTypeObject *ht) {
    PyObject *dict = ht ? ht->ht_type.tp_dict : NULL;
    PyObject *mod = dict && PyDict_Check(dict) ? PyDict_GetItemString(dict, "__module__") : NULL;
    const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
    if (!m) PyErr_Clear();
    return m;
}

static const char *heap_qualname_of(PyHeapTypeObject *ht) {
    PyObject *qualname = ht ? ht->ht_qualname : NULL;
    const char *q = qualname && PyUnicode_Check(qualname) ? PyUnicode_AsUTF8(qualname) : NULL;
    if (!q) PyErr_Clear();
    return q;
}

/* "module.qualname" of a class, read from its own storage (no descriptors, no __getattr__). */
static void put_type_name(Buf *b, PyTypeObject *tp) {
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

static void describe_key(KeyDesc *k, PyObject *const *args, size_t nargs, PyObject *kwnames) {
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

/* ------------------------------------------------------------------------------------ */
/* Probe                                                                                 */

typedef struct {
    PyObject_HEAD
    PyObject *func;        /* the user's function */
    PyObject *cache_dict;  /* borrowed: owned by the lru wrapper, which owns us */
    PyObject *on_first_miss; /* Python callable(probe) that announces the cache, or NULL */
    uint64_t cache_id;
    uint64_t seq;
    vectorcallfunc vectorcall;
} ProbeObject;

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

static PyTypeObject ProbeType = {
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
static PyObject *make_probe(PyObject *m, PyObject *args) {
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

/* ------------------------------------------------------------------------------------ */
/* Caches in a process the agent was attached to (growtrace attach)                      */

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
static PyObject *adopt_cache(PyObject *m, PyObject *wrapper) {
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
static PyObject *release_cache(PyObject *m, PyObject *wrapper) {
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

static PyObject *hook_new_caches(PyObject *m, PyObject *args) {
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

static PyObject *unhook_new_caches(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    if (g_lru_type && g_lru_type->tp_new == lru_new_probed) g_lru_type->tp_new = g_lru_new;
    Py_CLEAR(g_on_new_cache);
    Py_CLEAR(g_on_first_miss);
    Py_RETURN_NONE;
}

/* attach_probe(probe, cache_dict): the dict is only known once the wrapper exists. */
static PyObject *attach_probe(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *probe, *dict;
    if (!PyArg_ParseTuple(args, "O!O!", &ProbeType, &probe, &PyDict_Type, &dict)) return NULL;
    ((ProbeObject *)probe)->cache_dict = dict; /* borrowed, see ProbeObject */
    Py_RETURN_NONE;
}

static PyObject *new_cache_id(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    return PyLong_FromUnsignedLongLong(g_next_cache_id++);
}

static PyObject *capture_stack(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    return PyLong_FromUnsignedLongLong(g_native ? g_native->capture_stack() : 0);
}

static const char *utf8_or_empty(PyObject *s, Py_ssize_t *len) {
    if (s && PyUnicode_Check(s)) {
        const char *r = PyUnicode_AsUTF8AndSize(s, len);
        if (r) return r;
        PyErr_Clear();
    }
    *len = 0;
    return "";
}

/* cache_created(cache_id, wrapper, cache_dict, maxsize(-1), flags, stack_id, module, qualname,
                 creator_module, creator_file, creator_line, bound_names(str '\0'-joined),
                 creation_stack(list of str or None)) */
static PyObject *cache_created(PyObject *m, PyObject *args) {
    (void)m;
    unsigned long long cache_id, stack_id;
    PyObject *wrapper, *dict, *module, *qualname, *cmod, *cfile, *names, *cstack;
    long long maxsize;
    unsigned int flags, cline;
    if (!PyArg_ParseTuple(args, "KOOLIKUUUUIUO", &cache_id, &wrapper, &dict, &maxsize, &flags,
                          &stack_id, &module, &qualname, &cmod, &cfile, &cline, &names, &cstack))
        return NULL;
    Py_ssize_t ml, ql, cml, cfl, nl;
    growtrace_py_cache_info info = {0};
    info.size = sizeof info;
    info.flags = flags;
    info.cache_id = cache_id;
    info.wrapper = (uintptr_t)wrapper;
    info.cache_dict = PyDict_Check(dict) ? (uintptr_t)dict : 0;
    info.maxsize = maxsize;
    info.creation_stack_id = stack_id;
    info.entries = PyDict_Check(dict) ? (uint64_t)PyDict_GET_SIZE(dict) : 0;
    info.module = utf8_or_empty(module, &ml); info.module_len = (size_t)ml;
    info.qualname = utf8_or_empty(qualname, &ql); info.qualname_len = (size_t)ql;
    info.creator_module = utf8_or_empty(cmod, &cml); info.creator_module_len = (size_t)cml;
    info.creator_file = utf8_or_empty(cfile, &cfl); info.creator_file_len = (size_t)cfl;
    info.creator_line = cline;
    info.bound_names = utf8_or_empty(names, &nl); info.bound_names_len = (size_t)nl;
    g_counts[0]++;
    if (g_native) g_native->cache_created(&info);
    if (g_log_fd >= 0) {
        char store[8192];
        Buf b = {store, 0, sizeof store, 0};
        store[0] = '\0';
        log_begin(&b, "cache_create");
        buf_printf(&b, ",\"cache_id\":%llu,\"wrapper\":%llu,\"dict\":%llu,\"maxsize\":%lld,"
                       "\"flags\":%u,\"entries\":%llu,\"module\":",
                   cache_id, (unsigned long long)info.wrapper, (unsigned long long)info.cache_dict,
                   maxsize, flags, (unsigned long long)info.entries);
        buf_json(&b, info.module, info.module_len);
        buf_puts(&b, ",\"qualname\":");
        buf_json(&b, info.qualname, info.qualname_len);
        buf_puts(&b, ",\"creator_module\":");
        buf_json(&b, info.creator_module, info.creator_module_len);
        buf_puts(&b, ",\"creator_file\":");
        buf_json(&b, info.creator_file, info.creator_file_len);
        buf_printf(&b, ",\"creator_line\":%u,\"bound_names\":[", cline);
        const char *s = info.bound_names, *end = s + info.bound_names_len;
        int first = 1;
        while (s < end) {
            const char *z = memchr(s, '\0', (size_t)(end - s));
            size_t n = z ? (size_t)(z - s) : (size_t)(end - s);
            if (!first) buf_puts(&b, ",");
            buf_json(&b, s, n);
            first = 0;
            s += n + 1;
        }
        buf_puts(&b, "],\"stack\":[");
        if (cstack && PyList_Check(cstack)) {
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cstack); i++) {
                Py_ssize_t l;
                const char *f = utf8_or_empty(PyList_GET_ITEM(cstack, i), &l);
                if (i) buf_puts(&b, ",");
                buf_json(&b, f, (size_t)l);
            }
        }
        buf_puts(&b, "]");
        log_end(&b);
    }
    Py_RETURN_NONE;
}

static PyObject *cache_destroyed(PyObject *m, PyObject *args) {
    (void)m;
    unsigned long long cache_id;
    if (!PyArg_ParseTuple(args, "K", &cache_id)) return NULL;
    if (g_native) g_native->cache_destroyed(cache_id);
    if (g_log_fd >= 0) {
        char store[256];
        Buf b = {store, 0, sizeof store, 0};
        store[0] = '\0';
        log_begin(&b, "cache_destroy");
        buf_printf(&b, ",\"cache_id\":%llu", cache_id);
        log_end(&b);
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------ */
/* Type scan (gc.callbacks)                                                              */

static PyObject *g_get_objects; /* gc.get_objects */

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
#define GT_OLDEST_GENERATION 2
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

static PyObject *scan_young_types(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    scan_types(-1);
    Py_RETURN_NONE;
}

/* The classes made since the last collection are only seen at the next one: the agent scans
   once more when it is detached or the program begins to exit (type_scan_final). After that
   final scan, collections during the interpreter's shutdown report nothing twice. */
static int g_type_scan_final_done;

static PyObject *type_scan_final(PyObject *m, PyObject *noargs) {
    if (g_type_scan_final_done) Py_RETURN_NONE;
    g_type_scan_final_done = 1;
    return scan_young_types(m, noargs);
}

/* Full collections (the oldest generation): reported at their start and stop, so that the
   analyzer knows which frees are garbage being reclaimed rather than memory the program let go
   of. The one the agent runs at the shutdown mark reports itself (the program may have emptied
   gc.callbacks). */
static int g_scan_types;      /* no PyType_Ready hook: new classes are found at collections */
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

static PyObject *enable_type_scan(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    g_scan_types = 1;
    Py_RETURN_NONE;
}

static int walk_is_due(void);
static void run_walk(void);
static int native_has(size_t offset);

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
    if (start && g_scan_types && !g_type_scan_final_done) scan_types((int)generation);
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
static PyObject *take_gc_callbacks(PyObject *m, PyObject *gc_module) {
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
static PyObject *give_back_gc_callbacks(PyObject *m, PyObject *gc_module) {
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


/* ------------------------------------------------------------------------------------ */
/* Container walks (docs/containers.md)                                                  */

/* The walk itself is Python (growtrace-agent.py, container_walker); here is when it runs and
   what it reports. It runs on the program's own threads, never on one of ours: at the stop of a
   collection (gc.callbacks) or as a pending call (Py_AddPendingCall, queued from the library's
   tick on the main thread), once its time has come. Its cost is bounded by the time it took: the next walk waits
   at least `g_walk_period_ns`, and at least what it is expected to cost divided by `g_walk_share`. */
static PyObject *g_walker;             /* callable, or NULL: no walks */
static int g_in_walk;
static volatile int g_walk_pending;    /* a pending call is queued */
static volatile long long g_walk_pending_since;
static volatile long long g_last_walk_end_ns;  /* monotonic; set_walker() counts as a walk of no cost */
static long long g_last_walk_cost_ns;           /* its CPU time on its thread */
static Py_ssize_t g_last_walk_modules;          /* len(sys.modules) when it ran */
static PyObject *g_modules;                     /* sys.modules, held while there is a walker */
static long long g_walk_period_ns = 250000000LL;
static double g_walk_share = 0.01;
/* Walks reported so far (stats()["walks"]): test programs wait for the walks their test needs
   rather than for a time that a loaded machine stretches. */
static unsigned long long g_walks_reported;

static long long monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The calling thread's CPU time: what a walk costs the program, whatever else the machine runs. */
static long long thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Calls callable(arg) (or callable() when arg is NULL) with the library told that what is
   allocated meanwhile is the agent's own work, not the program's: it records none of it. */
static PyObject *call_as_own_work(PyObject *callable, PyObject *arg) {
    /* The function, not g_native, is kept: the call may let another thread take the GIL, and
       a detach there sets g_native to NULL (stop()) before this thread comes back. The library
       stays loaded after a detach, so its function may still be called. */
    int (*own_work)(int) = native_has(offsetof(growtrace_py_api, own_work)) ? g_native->own_work : NULL;
    /* No collection may start inside: what it frees is the program's, and the library records
       nothing while the agent works. */
    int gc_was_enabled = PyGC_Disable();
    int was_own = own_work ? own_work(1) : 0;
    /* The objects the walk made are not the program's: gc.get_count() must say after the walk
       what it said before (CPython's test_gc.test_get_count reads it right after gc.collect(),
       whose callbacks may run a walk). A collection made meanwhile (by another thread) has
       reset the count: it is left as that collection made it. */
    int *young = growtrace_young_count();
    const int young_before = *young;
    PyObject *r = arg ? PyObject_CallOneArg(callable, arg) : PyObject_CallNoArgs(callable);
    if (*young >= young_before) *young = young_before;
    if (own_work) own_work(was_own);
    if (gc_was_enabled) PyGC_Enable();
    return r;
}

/* own_work(callable, arg): the final walk and the walk at detach, made from Python, are the
   agent's own work as much as the walks run from here. */
static PyObject *own_work_call(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *callable, *arg;
    if (!PyArg_ParseTuple(args, "OO", &callable, &arg)) return NULL;
    return call_as_own_work(callable, arg);
}

static Py_ssize_t loaded_modules(void) {
    return g_modules && PyDict_Check(g_modules) ? PyDict_GET_SIZE(g_modules) : 0;
}

/* When the next walk may run. A walk's time grows with the modules it passes over (and with
   the heap, which this does not see), so the next one is expected to cost the last one's time
   scaled by how many more modules are loaded now: a
   program that imports most of its libraries after the first walk (the openai reproduction
   goes from 166 modules to over 1,000, and its walks from 25 to over 200 ms) is not walked
   again before that cost is paid for. No Python call, nothing allocated: the library's tick
   asks this from inside an allocation. */
static long long next_walk_ns(void) {
    double expected = (double)g_last_walk_cost_ns;
    Py_ssize_t now = loaded_modules();
    if (g_last_walk_modules > 0 && now > g_last_walk_modules) expected *= (double)now / (double)g_last_walk_modules;
    double wait = expected / g_walk_share;
    return g_last_walk_end_ns + (wait > (double)g_walk_period_ns ? (long long)wait : g_walk_period_ns);
}

static void run_walk(void) {
    if (!g_walker || g_in_walk) return;
    g_in_walk = 1;
    long long begin = thread_cpu_ns();
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb); /* the program's exception in flight, if any, is kept */
    PyObject *walker = Py_NewRef(g_walker);
    PyObject *r = call_as_own_work(walker, NULL);
    Py_DECREF(walker);
    Py_XDECREF(r);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    g_last_walk_cost_ns = thread_cpu_ns() - begin;
    g_last_walk_modules = loaded_modules();
    g_last_walk_end_ns = monotonic_ns();
    g_in_walk = 0;
}

static int walk_is_due(void) { return g_walker && !g_in_walk && monotonic_ns() >= next_walk_ns(); }

static int pending_walk(void *arg) {
    (void)arg;
    g_walk_pending = 0;
    if (walk_is_due()) run_walk();
    return 0; /* never raises into the program */
}

/* The library's tick: the main thread, holding the GIL, inside an allocation: it only queues. */
static void walk_tick(void) {
    long long now = monotonic_ns();
    if (!g_walker || now < next_walk_ns()) return;
    /* A call queued before a fork never runs in the child: asked again after a while. */
    if (g_walk_pending && now - g_walk_pending_since < 5000000000LL) return;
    g_walk_pending = 1;
    g_walk_pending_since = now;
    if (Py_AddPendingCall(pending_walk, NULL) != 0) g_walk_pending = 0;
}

static int native_has(size_t offset) { return g_native && g_native->size >= offset + sizeof(void *); }

/* walk_due(): whether a whole walk fits in the walks' share of the time now. The final walk
   and the one at detach are whole walks only then; otherwise they measure again only the
   containers already tracked, in the modules that hold them (GROWTRACE_PY_WALK_TRACKED_ONLY):
   in a run of seconds, a whole last walk would cost as much as all the others. A program that
   ends before its first walk gets a whole one. */
static PyObject *walk_due(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    return PyBool_FromLong(g_last_walk_cost_ns == 0 || monotonic_ns() >= next_walk_ns());
}

/* set_walker(callable or None, min_period_s, share): None stops the walks (at the shutdown mark,
   at detach). */
static PyObject *set_walker(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *walker;
    double period = 0.25, share = 0.01;
    if (!PyArg_ParseTuple(args, "O|dd", &walker, &period, &share)) return NULL;
    if (share > 0) g_walk_share = share;
    if (period > 0) g_walk_period_ns = (long long)(period * 1e9);
    Py_XSETREF(g_walker, walker == Py_None ? NULL : Py_NewRef(walker));
    PyObject *modules = g_walker ? PyImport_GetModuleDict() : NULL;
    Py_XSETREF(g_modules, Py_XNewRef(modules));
    g_last_walk_end_ns = monotonic_ns();
    g_last_walk_cost_ns = 0;
    g_last_walk_modules = loaded_modules();
    if (native_has(offsetof(growtrace_py_api, set_tick)) && g_native->set_tick)
        g_native->set_tick(g_walker ? walk_tick : NULL);
    Py_RETURN_NONE;
}

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
static PyObject *large_containers(PyObject *m, PyObject *args) {
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
static PyObject *report_containers(PyObject *m, PyObject *args) {
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

/* ------------------------------------------------------------------------------------ */
/* Set-up and self-checks                                                                */

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
    Py_XSETREF(g_get_objects, Py_NewRef(get_objects));
    g_type_scan_final_done = 0;
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
    if ((g_native || g_log_fd >= 0) && PyGC_IsEnabled()) {
        g_final_collecting = 1;
        report_collection(GROWTRACE_PY_GC_START, GT_OLDEST_GENERATION, GROWTRACE_PY_GC_AT_SHUTDOWN);
        PyGC_Collect();
        report_collection(GROWTRACE_PY_GC_STOP, GT_OLDEST_GENERATION, GROWTRACE_PY_GC_AT_SHUTDOWN);
        g_final_collecting = 0;
    }
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
