/* The agent's sinks: the preload library's API (growtrace_py_api.h) when it is loaded, JSON lines
 * to $GROWTRACE_PYAGENT_LOG (for tests, no tracer needed), both, or neither; and the bounded
 * buffer every JSON line is built in. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "sinks.h"

/* The name tracebacks show for a code object: its qualified name where it has one (3.11+). */
#if PY_VERSION_HEX >= 0x030B0000
#define GT_CODE_NAME(code) ((code)->co_qualname)
#else
#define GT_CODE_NAME(code) ((code)->co_name)
#endif

const growtrace_py_api *g_native;
int g_log_fd = -1;
unsigned long long g_counts[4];

int native_has(size_t offset) { return g_native && g_native->size >= offset + sizeof(void *); }

void buf_putn(Buf *b, const char *s, size_t n) {
    if (b->len + n >= b->cap) {
        n = b->len < b->cap - 1 ? b->cap - 1 - b->len : 0;
        b->overflow = 1;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
void buf_puts(Buf *b, const char *s) { buf_putn(b, s, strlen(s)); }
void buf_printf(Buf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) buf_putn(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
/* JSON string literal */
void buf_json(Buf *b, const char *s, size_t n) {
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

void log_begin(Buf *b, const char *kind) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    buf_printf(b, "{\"kind\":\"%s\",\"ns\":%lld,\"tid\":%ld", kind,
               (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, (long)syscall(SYS_gettid));
}
void log_end(Buf *b) {
    buf_puts(b, "}\n");
    if (b->overflow) { /* keep the line valid JSON: truncated records are dropped */
        return;
    }
    /* O_APPEND + one write per line: lines from threads and forked children never mix */
    ssize_t r = write(g_log_fd, b->p, b->len);
    (void)r;
}

/* The current Python stack as a JSON array of "file:line:function" (file sink only). */
void log_python_stack(Buf *b, const char *field) {
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

const char *utf8_or_empty(PyObject *s, Py_ssize_t *len) {
    if (s && PyUnicode_Check(s)) {
        const char *r = PyUnicode_AsUTF8AndSize(s, len);
        if (r) return r;
        PyErr_Clear();
    }
    *len = 0;
    return "";
}
