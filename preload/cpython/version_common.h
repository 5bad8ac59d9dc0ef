// Included by each version_3XX.cpp after that version's Python.h: the parts of a VersionLayout
// that are spelled the same in every version's headers (their values still come from them).
#pragma once

#include <cstddef>

#include "preload/cpython/code_generation.h"
#include "preload/cpython/frame_walker.h"
#include "preload/cpython/layout.h"

// The walker's entry points and the object offsets, in VersionLayout's order (each version
// file sets code_object_size itself, after them).
#define GROWTRACE_LAYOUT_WALKER(Traits)                                   \
    .capture = &::growtrace::preload::python::FrameWalker<Traits>::capture, \
    .capture_since = &::growtrace::preload::python::FrameWalker<Traits>::capture_since

#define GROWTRACE_LAYOUT_OBJECTS                                   \
    .type_basicsize = offsetof(PyTypeObject, tp_basicsize),        \
    .type_flags = offsetof(PyTypeObject, tp_flags),                \
    .type_name = offsetof(PyTypeObject, tp_name),                  \
    .type_dict = offsetof(PyTypeObject, tp_dict),                  \
    .type_dealloc = offsetof(PyTypeObject, tp_dealloc),            \
    .type_as_number = offsetof(PyTypeObject, tp_as_number),        \
    .heap_type_as_number = offsetof(PyHeapTypeObject, as_number),  \
    .heap_type_qualname = offsetof(PyHeapTypeObject, ht_qualname), \
    .dict_used = offsetof(PyDictObject, ma_used),                  \
    .object_type = offsetof(PyObject, ob_type),                    \
    .cfunction_method = offsetof(PyCFunctionObject, m_ml),         \
    .heap_type_flag = Py_TPFLAGS_HEAPTYPE,                         \
    .heap_type_object_size = sizeof(PyHeapTypeObject)

namespace growtrace::preload::python {

// A frame's prologue is one instruction per cell and free variable, plus two in generators
// (3.11+); frames further in than this need not be checked for not having started. (Only a
// function with more than six of those, caught allocating a cell in its prologue, would show
// a frame at its first line that CPython leaves out.)
inline constexpr int32_t kPrologueBound = 8;

namespace {  // each version file has its own, compiled against its own headers

// The accessors spelled the same in every version's headers.
struct CommonTraits {
    static unsigned long thread_id(void* tstate) { return static_cast<PyThreadState*>(tstate)->thread_id; }
};

#if PY_VERSION_HEX >= 0x030B0000
// 3.11+: where an interpreter frame is, given its code object and position (the versions name
// both differently); false for a frame that has not started (CPython leaves such frames out of
// tracebacks). Telling needs the code object's first traceable instruction, a likely cache
// miss, so only frames near their start look at it.
inline bool interpreter_frame_location(const _PyInterpreterFrame* f, PyCodeObject* code, const _Py_CODEUNIT* position,
                                       bool entry, FrameRef& out) {
    auto offset = static_cast<int32_t>(position - _PyCode_CODE(code));
    if (offset < kPrologueBound && f->owner != FRAME_OWNED_BY_GENERATOR && offset < code->_co_firsttraceable)
        return false;
    out = {code, offset, entry, code_generation(code)};
    return true;
}
#endif

}  // namespace
}  // namespace growtrace::preload::python
