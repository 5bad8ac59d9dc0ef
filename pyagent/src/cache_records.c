/* The records of a cache's life that the Python half emits: its creation (CacheCreate, with the
 * names it is bound to and, for the file sink, the stack that made it) and its destruction. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "cache_records.h"
#include "sinks.h"

PyObject *capture_stack(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    return PyLong_FromUnsignedLongLong(g_native ? g_native->capture_stack() : 0);
}

/* cache_created(cache_id, wrapper, cache_dict, maxsize(-1), flags, stack_id, module, qualname,
                 creator_module, creator_file, creator_line, bound_names(str '\0'-joined),
                 creation_stack(list of str or None)) */
PyObject *cache_created(PyObject *m, PyObject *args) {
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

PyObject *cache_destroyed(PyObject *m, PyObject *args) {
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
