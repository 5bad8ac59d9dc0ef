// CPython 3.12: as 3.11, but an evaluation loop call marks where it starts with a shim frame
// of its own on the C stack (owner FRAME_OWNED_BY_CSTACK) instead of an is_entry flag.
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include "preload/cpython/version_common.h"

namespace growtrace::preload::python {
namespace {

struct Traits312 : CommonTraits {
    using Frame = _PyInterpreterFrame;
    static constexpr bool kFramesOrdered = true;

    static const Frame* current(void* tstate) {
        auto* t = static_cast<PyThreadState*>(tstate);
        return t->cframe ? t->cframe->current_frame : nullptr;
    }
    static const Frame* previous(const Frame* f) { return f->previous; }
    static bool is_shim(const Frame* f) { return f->owner == FRAME_OWNED_BY_CSTACK; }
    static const void* code(const Frame* f) { return f->f_code; }
    static uintptr_t instruction(const Frame* f) { return reinterpret_cast<uintptr_t>(f->prev_instr); }
    static bool location(const Frame* f, FrameRef& out) {
        return !is_shim(f) &&
               interpreter_frame_location(f, f->f_code, f->prev_instr, f->previous && is_shim(f->previous), out);
    }
};

}  // namespace

extern const VersionLayout kCPython312 = {
    .minor = 12,
    GROWTRACE_LAYOUT_WALKER(Traits312),
    .gil_holder_symbol = "_PyThreadState_UncheckedGet",
    .is_finalizing_symbol = "_Py_IsFinalizing",
    .code_filename = offsetof(PyCodeObject, co_filename),
    .code_function = offsetof(PyCodeObject, co_qualname),
    GROWTRACE_LAYOUT_OBJECTS,
    .code_object_size = offsetof(PyCodeObject, co_code_adaptive),
};

}  // namespace growtrace::preload::python
