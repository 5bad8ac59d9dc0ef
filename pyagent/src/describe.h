/* Names of classes and descriptions of cache keys, read without running the program's code
   (describe.c). */
#ifndef GROWTRACE_PYAGENT_DESCRIBE_H
#define GROWTRACE_PYAGENT_DESCRIBE_H

#include <Python.h>
#include <stdint.h>

#include "sinks.h"

#define MAX_KEY_TYPES 16
#define KEY_DESC_CAP 512

/* A key's description and the classes it names (their addresses). */
typedef struct {
    Buf text;
    uintptr_t types[MAX_KEY_TYPES];
    size_t ntypes;
} KeyDesc;

PyHeapTypeObject *heap_type_of(PyTypeObject *tp);
const char *type_name_of(PyTypeObject *tp);
const char *heap_module_of(PyHeapTypeObject *ht);
const char *heap_qualname_of(PyHeapTypeObject *ht);
void put_type_name(Buf *b, PyTypeObject *tp);
void describe_key(KeyDesc *k, PyObject *const *args, size_t nargs, PyObject *kwnames);

#endif
