#include "preload/cpython/interpreter.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "preload/support/log.h"
#include "preload/cpython/checked_read.h"
#include "preload/cpython/code_generation.h"

namespace growtrace::preload::python {

bool g_present = false;

ThreadStateAccess g_thread_state_access;

namespace {

Interpreter g_interpreter;
bool g_probed = false;

// Py_TPFLAGS_UNICODE_SUBCLASS and Py_TPFLAGS_TYPE_SUBCLASS: the same bits in every version
// (PyUnicode_Check and PyType_Check test them).
constexpr unsigned long kUnicodeFlag = 1UL << 28;
constexpr unsigned long kTypeFlag = 1UL << 31;

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
           resolve(a.cfunction_type, "PyCFunction_Type") && resolve(a.unicode_type, "PyUnicode_Type") &&
           resolve(a.type_type, "PyType_Type") &&
           resolve(a.dict_type, "PyDict_Type") &&
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


bool initialized() { return g_present && g_interpreter.api.is_initialized(); }

const Interpreter& interpreter() { return g_interpreter; }

namespace {

// The header every object starts with, read checked (one copy): its reference count must be
// that of a live object (freed blocks hold the allocator's list pointers there), and it must
// name a type.
bool read_header(const void* object, Object*& type) {
    if (!object || reinterpret_cast<uintptr_t>(object) % alignof(void*)) return false;
    char header[32];
    const size_t size = layout().object_type + sizeof(Object*);
    if (size > sizeof header || !copy_checked(object, header, size)) return false;
    type = field<Object*>(header, layout().object_type);
    return field<ptrdiff_t>(header, 0) > 0 && type;
}

// A type object's flags, if `type` is one: its own type's flags say so.
bool type_flags_of(const Object* type, unsigned long& flags) {
    Object* meta = nullptr;
    unsigned long meta_flags = 0;
    return read_header(type, meta) && read_field(meta, layout().type_flags, meta_flags) && (meta_flags & kTypeFlag) &&
           read_field(type, layout().type_flags, flags);
}

// A str, or an instance of a class derived from str.
bool is_text(const Object* object) {
    Object* type = nullptr;
    if (!read_header(object, type)) return false;
    if (type == interpreter().api.unicode_type) return true;
    unsigned long flags = 0;
    return type_flags_of(type, flags) && (flags & kUnicodeFlag);
}

// A C string that may be anything (a type's tp_name): copied, and kept only if it ends within
// the copy; returns its length (0 and "" otherwise).
size_t copy_c_string(const char* text, char* out, size_t capacity) {
    char copy[256];
    size_t got = copy_readable_prefix(text, copy, std::min(capacity, sizeof copy));
    const void* end = memchr(copy, '\0', got);
    out[0] = '\0';
    if (!end) return 0;
    size_t length = static_cast<size_t>(static_cast<const char*>(end) - copy);
    memcpy(out, copy, length + 1);
    return length;
}

// A str's UTF-8 text, "" where it has none (a lone surrogate).
const char* utf8_of(const Object* text, size_t& size) {
    size = 0;
    ptrdiff_t n = 0;
    const char* utf8 = g_interpreter.api.utf8(const_cast<Object*>(text), &n);
    if (!utf8) {
        g_interpreter.api.clear_error();  // a lone surrogate cannot be encoded
        return "";
    }
    size = static_cast<size_t>(n);
    return utf8;
}
}  // namespace

const char* text_of(const Object* text, size_t& size) {
    size = 0;
    return is_text(text) ? utf8_of(text, size) : "";
}

bool read_ready_class_names(const void* type, ClassNames& out) {
    out = ClassNames{};
    const VersionLayout& l = layout();
    // What PyType_Ready has just read and written without faulting, and what it requires of a
    // type it makes ready, is read directly: the PyTypeObject itself, its flags and slots, its
    // type (a ready type, with a name) and the dict it made. The rest is proved first.
    if (!type || !(field<unsigned long>(type, l.type_flags) & l.heap_type_flag)) return false;
    // The flag alone does not make the object a PyHeapTypeObject: Cython sets it on its static
    // types for the time PyType_Ready runs, and the heap type's fields would then be read from
    // whatever follows the static type in memory (grpcio does so: `import grpc`). A real heap type
    // (type(), PyType_FromSpec*) has its slot tables inside itself; only then are its heap
    // fields there to read.
    const char* own_tables = static_cast<const char*>(type) + l.heap_type_as_number;
    if (field<const char*>(type, l.type_as_number) != own_tables) return false;
    // ht_qualname is whatever the code that made the class put there: NULL, a str, or anything.
    out.qualname = text_of(field<Object*>(type, l.heap_type_qualname), out.qualname_len);
    if (!out.qualname_len) {  // no qualified name (a class built by C code): its tp_name
        out.qualname = out.name_copy;
        out.qualname_len = copy_c_string(field<const char*>(type, l.type_name), out.name_copy, sizeof out.name_copy);
    }
    // __module__ from the class's own dict (no lookup that could run the program's code). An
    // extension may have set tp_dict itself before PyType_Ready: checked.
    const CApi& api = g_interpreter.api;
    Object* dict_type = nullptr;
    if (auto* dict = field<Object*>(type, l.type_dict); read_header(dict, dict_type) && dict_type == api.dict_type) {
        // The value is one the dict holds a reference to: a live object, whose type is read
        // directly (a str subclass still goes through the checked text_of).
        Object* module = api.dict_get(dict, "__module__");
        if (!module)
            api.clear_error();
        else if (field<Object*>(module, l.object_type) == api.unicode_type)
            out.module = utf8_of(module, out.module_len);
        else
            out.module = text_of(module, out.module_len);
    }
    // The metaclass's name; PyType_Ready only compares the pointer when it is `type`.
    auto* meta = field<Object*>(type, l.object_type);
    const char* meta_name = nullptr;
    if (meta == api.type_type) {
        out.metaclass_len = sizeof "type" - 1;
        memcpy(out.metaclass, "type", sizeof "type");
    } else if (read_field(meta, l.type_name, meta_name)) {
        out.metaclass_len = copy_c_string(meta_name, out.metaclass, sizeof out.metaclass);
    }
    return true;
}

}  // namespace growtrace::preload::python

namespace growtrace::preload::python {
namespace {

using Destructor = void (*)(void*);
std::atomic<Destructor> g_code_destructor{nullptr};

void code_destructor_watched(void* code) {
    note_code_object_freed(code);
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

void unwatch_code_objects() {
    if (!present()) return;
    void* code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    Destructor original = g_code_destructor.load();
    if (!code_type || !original) return;
    auto* slot = reinterpret_cast<std::atomic<Destructor>*>(static_cast<char*>(code_type) + layout().type_dealloc);
    Destructor watched = code_destructor_watched;
    slot->compare_exchange_strong(watched, original);
}

}  // namespace growtrace::preload::python
