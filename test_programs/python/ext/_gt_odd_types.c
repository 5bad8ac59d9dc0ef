/* Classes made the ways C extensions and Cython make them, including the unusual ones a tracer
   that reads classes must survive (tests/e2e/python_extensions_test.cpp). Built once per CPython
   version (test_programs/CMakeLists.txt); odd_types.py drives it and prints what it made.

   - cython_static: a static type flagged Py_TPFLAGS_HEAPTYPE (and IMMUTABLETYPE) for the time
     PyType_Ready runs, as Cython's __Pyx_PyType_Ready does for every cdef class when it does
     not use type specs. The bytes that follow it, where a heap type's fields would be, hold a
     pointer to nothing (0x10), as the next static variable may.
   - guard_page: the same, with the type object at the very end of a readable page and an
     unreadable page after it.
   - plain_static: a static type made ready as is.
   - no_name: a static type without tp_name (PyType_Ready refuses it; the error is printed).
   - from_spec, no_module, with_module: PyType_FromSpec / FromModuleAndSpec heap types (a dotted
     name, a bare name, a module of their own).
   - hand_built: a heap type allocated by C code and made ready without names
     (ht_name/ht_qualname NULL, no slot tables of its own).
   - odd_qualname: a heap type whose ht_qualname is not a str when PyType_Ready runs. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef Py_TPFLAGS_IMMUTABLETYPE
#define Py_TPFLAGS_IMMUTABLETYPE 0
#endif

typedef struct {
    PyObject_HEAD
    long value;
} Odd;

/* Cython's way: the flags set around PyType_Ready, then taken back. */
static int ready_like_cython(PyTypeObject *t) {
    t->tp_flags |= Py_TPFLAGS_HEAPTYPE | Py_TPFLAGS_IMMUTABLETYPE;
    int r = PyType_Ready(t);
    t->tp_flags &= ~Py_TPFLAGS_HEAPTYPE;
    return r;
}

#define ODD_STATIC_TYPE(var, name)                                   \
    {                                                                \
        PyVarObject_HEAD_INIT(NULL, 0)                               \
        .tp_name = name,                                             \
        .tp_basicsize = sizeof(Odd),                                 \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,        \
        .tp_new = PyType_GenericNew,                                 \
    }

/* The static type and, right after it, what a heap type's fields would be read from. */
static struct {
    PyTypeObject type;
    void *after[256];
} cython_static = {ODD_STATIC_TYPE(cython_static, "_gt_odd_types.CythonStatic")};

static PyTypeObject plain_static = ODD_STATIC_TYPE(plain_static, "_gt_odd_types.PlainStatic");

static PyTypeObject no_name = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_basicsize = sizeof(Odd),
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

static const PyTypeObject guard_template = ODD_STATIC_TYPE(guard_template, "_gt_odd_types.GuardPage");

static PyType_Slot odd_slots[] = {{0, NULL}};
static PyType_Spec from_spec_spec = {"_gt_odd_types.FromSpec", sizeof(Odd), 0,
                                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, odd_slots};
static PyType_Spec no_module_spec = {"NoModule", sizeof(Odd), 0, Py_TPFLAGS_DEFAULT, odd_slots};
static PyType_Spec with_module_spec = {"_gt_odd_types.WithModule", sizeof(Odd), 0, Py_TPFLAGS_DEFAULT, odd_slots};

static PyObject *made; /* every type made, kept for ever (static and hand-built types must live) */

static int keep(const char *label, PyObject *type, PyObject *status) {
    PyObject *item = Py_BuildValue("(sOO)", label, type ? type : Py_None, status);
    if (!item) return -1;
    int r = PyList_Append(made, item);
    Py_DECREF(item);
    return r;
}

static int keep_ready(const char *label, PyTypeObject *type, int rc) {
    if (rc < 0) {
        PyObject *type_, *value, *tb;
        PyErr_Fetch(&type_, &value, &tb);
        PyErr_NormalizeException(&type_, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        PyObject *status = PyUnicode_FromFormat("refused: %s: %S", type_ ? ((PyTypeObject *)type_)->tp_name : "?",
                                                text ? text : Py_None);
        Py_XDECREF(type_); Py_XDECREF(value); Py_XDECREF(tb); Py_XDECREF(text);
        if (!status) return -1;
        int r = keep(label, NULL, status);
        Py_DECREF(status);
        return r;
    }
    PyObject *status = PyUnicode_FromString("ready");
    int r = status ? keep(label, (PyObject *)type, status) : -1;
    Py_XDECREF(status);
    return r;
}

static PyTypeObject *on_guard_page(void) {
    long page = sysconf(_SC_PAGESIZE);
    char *pages = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) return NULL;
    if (mprotect(pages + page, (size_t)page, PROT_NONE) != 0) return NULL;
    PyTypeObject *t = (PyTypeObject *)(pages + page - sizeof(PyTypeObject));
    memcpy(t, &guard_template, sizeof *t);
    return t;
}

/* A heap type as old C code builds it: allocated by the metatype, filled by hand. */
static PyTypeObject *hand_built(const char *name, PyObject *qualname) {
    PyTypeObject *t = (PyTypeObject *)PyType_Type.tp_alloc(&PyType_Type, 0);
    if (!t) return NULL;
    t->tp_name = name;
    t->tp_basicsize = sizeof(Odd);
    t->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HEAPTYPE;
    t->tp_new = PyType_GenericNew;
    if (qualname) {
        PyHeapTypeObject *ht = (PyHeapTypeObject *)t;
        ht->ht_qualname = Py_NewRef(qualname);
        ht->ht_name = Py_NewRef(qualname);
        t->tp_as_number = &ht->as_number; /* its slot tables are its own, as type() makes them */
    }
    return t;
}

static PyObject *make_all(PyObject *module, PyObject *noargs) {
    (void)noargs;
    for (size_t i = 0; i < sizeof cython_static.after / sizeof cython_static.after[0]; i++)
        cython_static.after[i] = (void *)0x10;
    if (keep_ready("cython_static", &cython_static.type, ready_like_cython(&cython_static.type)) < 0) return NULL;

    PyTypeObject *guarded = on_guard_page();
    if (!guarded) return PyErr_SetFromErrno(PyExc_OSError);
    if (keep_ready("guard_page", guarded, ready_like_cython(guarded)) < 0) return NULL;

    if (keep_ready("plain_static", &plain_static, PyType_Ready(&plain_static)) < 0) return NULL;
    if (keep_ready("no_name", &no_name, PyType_Ready(&no_name)) < 0) return NULL;

    PyObject *t = PyType_FromSpec(&from_spec_spec);
    if (!t || keep_ready("from_spec", (PyTypeObject *)t, 0) < 0) return NULL;
    Py_DECREF(t);
    t = PyType_FromSpec(&no_module_spec);
    if (!t || keep_ready("no_module", (PyTypeObject *)t, 0) < 0) return NULL;
    Py_DECREF(t);
    t = PyType_FromModuleAndSpec(module, &with_module_spec, NULL);
    if (!t || keep_ready("with_module", (PyTypeObject *)t, 0) < 0) return NULL;
    Py_DECREF(t);

    PyTypeObject *h = hand_built("_gt_odd_types.HandBuilt", NULL);
    if (!h || keep_ready("hand_built", h, PyType_Ready(h)) < 0) return NULL;
    PyObject *number = PyLong_FromLong(42);
    h = number ? hand_built("_gt_odd_types.OddQualname", number) : NULL;
    Py_XDECREF(number);
    if (!h || keep_ready("odd_qualname", h, PyType_Ready(h)) < 0) return NULL;
    return Py_NewRef(made);
}

/* An instance of a type made here, and its value (they work once made ready). */
static PyObject *instance_value(PyObject *module, PyObject *type) {
    (void)module;
    if (!PyType_Check(type)) return PyErr_Format(PyExc_TypeError, "a type");
    PyObject *o = PyObject_CallNoArgs(type);
    if (!o) return NULL;
    ((Odd *)o)->value = 7;
    long v = ((Odd *)o)->value;
    Py_DECREF(o);
    return PyLong_FromLong(v);
}

static PyMethodDef methods[] = {
    {"make_all", make_all, METH_NOARGS, "Makes every class; returns [(label, type or None, status)]."},
    {"instance_value", instance_value, METH_O, "Makes an instance of the type, sets and reads its field."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_gt_odd_types", NULL, -1, methods};

PyMODINIT_FUNC PyInit__gt_odd_types(void) {
    made = PyList_New(0);
    if (!made) return NULL;
    return PyModule_Create(&module_def);
}
