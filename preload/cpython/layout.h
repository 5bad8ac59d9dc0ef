// The seam between growtrace and CPython's internals. Everything that differs between
// interpreter versions (frame layout, object offsets, symbol names) is described by one
// VersionLayout per supported minor version, each defined in its own file (version_3XX.cpp)
// compiled against that version's own headers. Nothing outside preload/cpython/ reads
// an interpreter structure except through this interface.
//
// Adding a version: a version_3XX.cpp (copy the nearest one, follow the header changes; the
// build and tools/setup_python.sh find the versions by these files), and a row in the tests'
// interpreter lists (tests/e2e pythons_under_test(), pyagent/tests INTERPRETERS).
#pragma once

#include <cstddef>
#include <cstdint>

#include "preload/cpython/frames.h"

namespace growtrace::preload::python {

// Functions every version's walker calls to find the calling thread's state; resolved by
// name (the names differ between versions) in interpreter.cpp before any walk.
struct ThreadStateAccess {
    void* (*gil_holder)();         // the thread state holding the GIL, or null
    void* (*this_thread_state)();  // the calling thread's own state (PyGILState_GetThisThreadState)
};
extern ThreadStateAccess g_thread_state_access;

struct VersionLayout {
    int minor;  // 3.<minor>

    // The calling thread's Python frames, innermost first (capture), or against its previous
    // stack (capture_since: see python_frames.h). Both return 0 unless the thread runs Python
    // and holds the GIL.
    int (*capture)(FrameRef* frames, int max_frames);
    int (*capture_since)(StackMemory& memory, int& shared, bool& confirmed);

    // Symbols whose names changed between versions.
    const char* gil_holder_symbol;
    const char* is_finalizing_symbol;

    // Object offsets (bytes). The function name of a frame is the code's qualified name where
    // the version has one (3.11+), else its plain name.
    size_t code_filename;
    size_t code_function;
    size_t type_basicsize;       // PyTypeObject.tp_basicsize
    size_t type_flags;           // PyTypeObject.tp_flags
    size_t type_name;            // PyTypeObject.tp_name
    size_t type_dict;            // PyTypeObject.tp_dict
    size_t type_dealloc;         // PyTypeObject.tp_dealloc
    size_t type_as_number;       // PyTypeObject.tp_as_number
    size_t heap_type_as_number;  // PyHeapTypeObject.as_number (a heap type's own slot table)
    size_t heap_type_qualname;   // PyHeapTypeObject.ht_qualname
    size_t dict_used;            // PyDictObject.ma_used
    size_t object_type;          // PyObject.ob_type
    size_t cfunction_method;     // PyCFunctionObject.m_ml (a builtin function's PyMethodDef)
    unsigned long heap_type_flag;  // Py_TPFLAGS_HEAPTYPE

    // Sizes the running interpreter must agree with (read from its type objects at probe):
    // a build whose structures differ from these headers' is refused, not misread.
    size_t heap_type_object_size;  // sizeof(PyHeapTypeObject) = PyType_Type.tp_basicsize
    size_t code_object_size;       // PyCode_Type.tp_basicsize: the code object before its bytecode
};

// The layout of CPython 3.<minor> if this build of growtrace has it (its headers were found
// at build time), else null.
const VersionLayout* version_layout(int minor);

// The minor versions this build has layouts for, for messages ("3.10, 3.11, 3.12, 3.13").
const char* supported_versions();

}  // namespace growtrace::preload::python
