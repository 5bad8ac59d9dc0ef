// CPython 3.13: as 3.12, with the innermost frame on the thread state itself (no _PyCFrame),
// the code object in f_executable and the position as instr_ptr (the instruction executing).
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include "preload/cpython/version_common.h"

namespace growtrace::preload::python {
namespace {

struct Traits313 : CommonTraits {
    using Frame = _PyInterpreterFrame;
    static constexpr bool kFramesOrdered = true;

    static const Frame* current(void* tstate) { return static_cast<PyThreadState*>(tstate)->current_frame; }
    static const Frame* previous(const Frame* f) { return f->previous; }
    static bool is_shim(const Frame* f) { return f->owner == FRAME_OWNED_BY_CSTACK; }
    static const void* code(const Frame* f) { return f->f_executable; }
    static uintptr_t instruction(const Frame* f) { return reinterpret_cast<uintptr_t>(f->instr_ptr); }
    static bool location(const Frame* f, FrameRef& out) {
        return !is_shim(f) && interpreter_frame_location(f, reinterpret_cast<PyCodeObject*>(f->f_executable),
                                                         f->instr_ptr, f->previous && is_shim(f->previous), out);
    }
};

}  // namespace

extern const VersionLayout kCPython313 = {
    .minor = 13,
    GROWTRACE_LAYOUT_WALKER(Traits313),
    .gil_holder_symbol = "PyThreadState_GetUnchecked",
    .is_finalizing_symbol = "Py_IsFinalizing",
    .code_filename = offsetof(PyCodeObject, co_filename),
    .code_function = offsetof(PyCodeObject, co_qualname),
    GROWTRACE_LAYOUT_OBJECTS,
    .code_object_size = offsetof(PyCodeObject, co_code_adaptive),
};

}  // namespace growtrace::preload::python
