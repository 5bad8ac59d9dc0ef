// CPython 3.10: frames are heap objects (PyFrameObject) linked by f_back, one evaluation loop
// call per frame; f_lasti is the index of the last instruction started (-1 before the first).
#include <Python.h>
#include <frameobject.h>

#include "preload/cpython/version_common.h"

namespace growtrace::preload::python {
namespace {

struct Traits310 : CommonTraits {
    using Frame = PyFrameObject;
    static constexpr bool kFramesOrdered = false;

    static const Frame* current(void* tstate) { return static_cast<PyThreadState*>(tstate)->frame; }
    static const Frame* previous(const Frame* f) { return f->f_back; }
    static bool is_shim(const Frame*) { return false; }
    static const void* code(const Frame* f) { return f->f_code; }
    static uintptr_t instruction(const Frame* f) { return static_cast<uint32_t>(f->f_lasti); }
    static bool location(const Frame* f, FrameRef& out) {
        if (f->f_lasti < 0) return false;
        out = {f->f_code, f->f_lasti, true, code_generation(f->f_code)};
        return true;
    }
};

}  // namespace

extern const VersionLayout kCPython310 = {
    .minor = 10,
    GROWTRACE_LAYOUT_WALKER(Traits310),
    .gil_holder_symbol = "_PyThreadState_UncheckedGet",
    .is_finalizing_symbol = "_Py_IsFinalizing",
    .code_filename = offsetof(PyCodeObject, co_filename),
    .code_function = offsetof(PyCodeObject, co_name),  // 3.10 code objects have no qualified name
    GROWTRACE_LAYOUT_OBJECTS,
    .code_object_size = sizeof(PyCodeObject),
};

}  // namespace growtrace::preload::python
