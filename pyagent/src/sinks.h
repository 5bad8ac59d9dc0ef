/* The agent's sinks (sinks.c): the preload library's API, the JSON-lines log file, and the
   bounded buffer a log line is built in. */
#ifndef GROWTRACE_PYAGENT_SINKS_H
#define GROWTRACE_PYAGENT_SINKS_H

#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#include "contracts/growtrace_py_api.h"

extern const growtrace_py_api *g_native;  /* preload library, or NULL */
extern int g_log_fd;                      /* JSON lines file, or -1 */
extern unsigned long long g_counts[4];    /* creates, begins, ends, types: for stats() */

/* Whether the library's API is recent enough to have the member at `offset` (a function). */
int native_has(size_t offset);

/* Text in a caller's storage: what does not fit is cut and `overflow` set. */
typedef struct {
    char *p;
    size_t len, cap;
    int overflow;
} Buf;

void buf_putn(Buf *b, const char *s, size_t n);
void buf_puts(Buf *b, const char *s);
void buf_printf(Buf *b, const char *fmt, ...);
void buf_json(Buf *b, const char *s, size_t n);

/* A log line: log_begin opens the record (kind, time, thread), log_end closes and writes it. */
void log_begin(Buf *b, const char *kind);
void log_end(Buf *b);
void log_python_stack(Buf *b, const char *field);

/* The UTF-8 of a str, or "" (length 0) for anything else. */
const char *utf8_or_empty(PyObject *s, Py_ssize_t *len);

#endif
