#include "preload/python/cpython/interpreter.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "preload/log.h"
#include "preload/python/cpython/code_generation.h"

namespace growtrace::preload::python {

ThreadStateAccess g_thread_state_access;

namespace {

Interpreter g_interpreter;
bool g_probed = false;
bool g_present = false;

// Py_TPFLAGS_UNICODE_SUBCLASS: the same bit in every version (PyUnicode_Check tests it).
constexpr unsigned long kUnicodeFlag = 1UL << 28;

template <typename F>
bool resolve(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
    return fn != nullptr;
}

bool resolve_api(const VersionLayout& layout) {
    CApi& a = g_interpreter.api;
    return resolve(a.is_initialized, "Py_IsInitialized") && resolve(a.is_finalizing, layout.is_finalizing_symbol) &&
           resolve(a.addr_to_line, "PyCode_Addr2Line") && resolve(a.utf8, "PyUnicode_AsUTF8AndSize") &&
           resolve(a.gil_ensure, "PyGILState_Ensure") && resolve(a.gil_release, "PyGILState_Release") &&
           resolve(a.dict_new, "PyDict_New") && resolve(a.dict_set, "PyDict_SetItemString") &&
           resolve(a.dict_get, "PyDict_GetItemString") && resolve(a.text, "PyUnicode_FromString") &&
           resolve(a.number, "PyLong_FromUnsignedLongLong") && resolve(a.run, "PyRun_StringFlags") &&
           resolve(a.call, "PyObject_CallNoArgs") && resolve(a.decref, "Py_DecRef") &&
           resolve(a.clear_error, "PyErr_Clear") && resolve(a.get_allocator, "PyMem_GetAllocator") &&
           resolve(a.set_allocator, "PyMem_SetAllocator") && resolve(a.sys_get, "PySys_GetObject") &&
           resolve(a.add_pending_call, "Py_AddPendingCall") &&
           resolve(a.cfunction_type, "PyCFunction_Type") &&
           resolve(g_thread_state_access.gil_holder, layout.gil_holder_symbol) &&
           resolve(g_thread_state_access.this_thread_state, "PyGILState_GetThisThreadState");
}

bool find_eval_loop() {
    void* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
    if (!eval) return false;
    Dl_info info;
    void* entry = nullptr;
    if (!dladdr1(eval, &info, &entry, RTLD_DL_SYMENT) || !entry) return false;
    auto* sym = static_cast<const ElfW(Sym)*>(entry);
    g_interpreter.eval_begin = reinterpret_cast<uint64_t>(eval);
    g_interpreter.eval_end = g_interpreter.eval_begin + sym->st_size;
    return sym->st_size > 0;
}

// The structures of the running interpreter are the ones the layout was compiled from: the
// sizes of code objects and of classes, as its own type objects state them.
bool sizes_agree(const VersionLayout& layout) {
    const void* code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    const void* type_type = dlsym(RTLD_DEFAULT, "PyType_Type");
    if (!code_type || !type_type) return false;
    return field<ptrdiff_t>(code_type, layout.type_basicsize) == static_cast<ptrdiff_t>(layout.code_object_size) &&
           field<ptrdiff_t>(type_type, layout.type_basicsize) == static_cast<ptrdiff_t>(layout.heap_type_object_size);
}

constexpr const char* kWithout = "native stacks only (no Python frames, Python object allocations, caches or classes)";

void refuse(const char* version_text, const char* why) {
    log_line("Python %d.%d.%d%s: %s; %s", g_interpreter.major, g_interpreter.minor, g_interpreter.micro,
             strstr(version_text, "free-threading") ? " (free-threaded)" : "", why, kWithout);
}

bool probe_once() {
    if (!resolve(g_interpreter.api.version, "Py_GetVersion")) return false;  // not CPython
    const char* text = g_interpreter.api.version();
    Interpreter& in = g_interpreter;
    if (sscanf(text, "%d.%d.%d", &in.major, &in.minor, &in.micro) < 2) return false;
    char why[160];
    if (strstr(text, "free-threading")) {
        refuse(text, "free-threaded builds are not supported");
        return false;
    }
    const VersionLayout* layout = in.major == 3 ? version_layout(in.minor) : nullptr;
    if (!layout) {
        snprintf(why, sizeof why, "not supported (this growtrace reads CPython %s)", supported_versions());
        refuse(text, why);
        return false;
    }
    if (!sizes_agree(*layout)) {
        refuse(text, "its code object or class layout differs from the CPython headers growtrace was built with");
        return false;
    }
    if (!resolve_api(*layout) || !find_eval_loop()) {
        refuse(text, "a function growtrace needs is not exported");
        return false;
    }
    in.layout = layout;
    return true;
}

}  // namespace

bool probe() {
    if (g_probed) return g_present;
    g_probed = true;
    g_present = probe_once();
    return g_present;
}

bool present() { return g_present; }

bool initialized() { return g_present && g_interpreter.api.is_initialized(); }

const Interpreter& interpreter() { return g_interpreter; }

const char* text_of(const Object* text, size_t& size) {
    size = 0;
    if (!text || !(type_flags(type_of(text)) & kUnicodeFlag)) return "";
    ptrdiff_t n = 0;
    const char* utf8 = g_interpreter.api.utf8(const_cast<Object*>(text), &n);
    if (!utf8) {
        g_interpreter.api.clear_error();  // a lone surrogate cannot be encoded
        return "";
    }
    size = static_cast<size_t>(n);
    return utf8;
}

}  // namespace growtrace::preload::python

namespace growtrace::preload::python {
namespace {

using Destructor = void (*)(void*);
std::atomic<Destructor> g_code_destructor{nullptr};

void code_destructor_watched(void* code) {
    code_generation_bucket(code).fetch_add(1, std::memory_order_relaxed);
    g_code_destructor.load(std::memory_order_relaxed)(code);
}

}  // namespace

bool watch_code_objects() {
    if (!present()) return false;
    void* code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    if (!code_type) return false;
    auto* slot = reinterpret_cast<std::atomic<Destructor>*>(static_cast<char*>(code_type) + layout().type_dealloc);
    Destructor current = slot->load();
    if (current == code_destructor_watched) return true;
    g_code_destructor.store(current);
    slot->store(code_destructor_watched);
    return true;
}

}  // namespace growtrace::preload::python
