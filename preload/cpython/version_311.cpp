// CPython 3.11: frames (_PyInterpreterFrame) live in per-thread chunks that grow upwards;
// one evaluation loop call runs frames up to the one marked is_entry.
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include "preload/cpython/version_common.h"

namespace growtrace::preload::python {
namespace {

struct Traits311 : CommonTraits {
    using Frame = _PyInterpreterFrame;
    static constexpr bool kFramesOrdered = true;

    static const Frame* current(void* tstate) {
        auto* t = static_cast<PyThreadState*>(tstate);
        return t->cframe ? t->cframe->current_frame : nullptr;
    }
    static const Frame* previous(const Frame* f) { return f->previous; }
    static bool is_shim(const Frame*) { return false; }
    static const void* code(const Frame* f) { return f->f_code; }
    static uintptr_t instruction(const Frame* f) { return reinterpret_cast<uintptr_t>(f->prev_instr); }
    static bool location(const Frame* f, FrameRef& out) {
        return interpreter_frame_location(f, f->f_code, f->prev_instr, f->is_entry, out);
    }
};

}  // namespace

extern const VersionLayout kCPython311 = {
    .minor = 11,
    GROWTRACE_LAYOUT_WALKER(Traits311),
    .gil_holder_symbol = "_PyThreadState_UncheckedGet",
    .is_finalizing_symbol = "_Py_IsFinalizing",
    .code_filename = offsetof(PyCodeObject, co_filename),
    .code_function = offsetof(PyCodeObject, co_qualname),
    GROWTRACE_LAYOUT_OBJECTS,
    .code_object_size = offsetof(PyCodeObject, co_code_adaptive),
};

}  // namespace growtrace::preload::python
