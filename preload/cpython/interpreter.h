// The CPython running in this process, found once: its version, the layout growtrace reads it
// with (layout.h), and the C API functions the library calls. Functions are resolved by name
// with dlsym, so the library works unchanged in a process without Python and in a Python
// linked into its executable (which exports the same symbols). No interpreter header is
// included here: the few stable C API types the library needs are declared below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "preload/cpython/layout.h"

namespace growtrace::preload::python {

struct Object;  // a PyObject, opaque outside the version files

// PyMemAllocatorEx and its domains (PEP 445), the same in every version.
struct MemAllocator {
    void* ctx;
    void* (*malloc)(void* ctx, size_t size);
    void* (*calloc)(void* ctx, size_t count, size_t size);
    void* (*realloc)(void* ctx, void* ptr, size_t size);
    void (*free)(void* ctx, void* ptr);
};
enum class AllocatorDomain : int { Raw = 0, Mem = 1, Object = 2 };

inline constexpr int kFileInput = 257;  // Py_file_input

// The stable C API functions the library calls.
struct CApi {
    const char* (*version)();
    int (*is_initialized)();
    int (*is_finalizing)();
    int (*addr_to_line)(const void* code, int byte_offset);
    const char* (*utf8)(Object* text, ptrdiff_t* size);
    int (*gil_ensure)();  // PyGILState_STATE is an int-sized enum
    void (*gil_release)(int state);
    Object* (*dict_new)();
    int (*dict_set)(Object* dict, const char* key, Object* value);
    Object* (*dict_get)(Object* dict, const char* key);  // borrowed
    Object* (*text)(const char* utf8);
    Object* (*number)(unsigned long long value);
    Object* (*run)(const char* source, int start, Object* globals, Object* locals, void* flags);
    Object* (*call)(Object* callable);
    void (*decref)(Object* object);
    void (*clear_error)();
    void (*get_allocator)(AllocatorDomain domain, MemAllocator* out);
    void (*set_allocator)(AllocatorDomain domain, MemAllocator* allocator);
    Object* (*sys_get)(const char* name);  // borrowed; keeps the pending exception
    int (*add_pending_call)(int (*function)(void*), void* arg);  // any thread, no GIL needed
    Object* cfunction_type;                // &PyCFunction_Type (builtin functions)
    Object* unicode_type;                  // &PyUnicode_Type
    Object* dict_type;                     // &PyDict_Type
    Object* type_type;                     // &PyType_Type
};

// A builtin function's entry in its module's method table (PyMethodDef, the same in every
// version).
struct MethodDef {
    const char* name;
    Object* (*function)(Object* self, Object* args);
    int flags;
    const char* doc;
};
inline constexpr int kMethNoArgs = 0x0004;  // METH_NOARGS

struct Interpreter {
    int major = 0, minor = 0, micro = 0;
    const VersionLayout* layout = nullptr;
    CApi api{};
    uint64_t eval_begin = 0, eval_end = 0;  // _PyEval_EvalFrameDefault's machine code
};

// Looks for CPython in the process once (later calls are cheap). True if it runs one that
// growtrace reads; for a CPython it cannot read (another version, a free-threaded build, a
// build whose structures differ from the headers'), says once on stderr what is missing.
bool probe();
// Inline: every native allocation asks (CapturedStack::capture), most in programs without one.
extern bool g_present;
inline bool present() { return g_present; }
// Py_IsInitialized(), false where there is no supported CPython.
bool initialized();
// Valid while present().
const Interpreter& interpreter();

// Reading objects through the layout (present() only). `field` loads directly: only for
// objects whose fields are known to be there (the library's own, or ones checked before);
// anything else is read with read_field (checked_read.h), which never faults.
template <typename T>
inline T field(const void* object, size_t offset) {
    T value;
    memcpy(&value, static_cast<const char*>(object) + offset, sizeof value);
    return value;
}
inline const VersionLayout& layout() { return *interpreter().layout; }

// The UTF-8 text of a str object (GIL held: the interpreter may cache the encoding on it);
// "" for anything that is not a live str, read with checked reads (a pointer from a slot that
// was never set, or that points anywhere, gives "").
const char* text_of(const Object* text, size_t& size);

// The names of a class that PyType_Ready has just made ready (it returned 0; GIL held), for
// its TypeCreate record. What PyType_Ready itself read, wrote or required (the PyTypeObject,
// its type, the dict it made) is read directly; the heap type's own fields only once the class
// is proved to be one, and what they point to only through checked reads. False means "skip
// this class": it is not a heap type (a static type, including one that Cython flags as a heap
// type while PyType_Ready runs, or one built by C code without its own slot tables). Strings
// point into the interpreter's objects (module, qualname) or into this struct, and are valid
// while both are.
struct ClassNames {
    const char* module = "";
    size_t module_len = 0;
    const char* qualname = "";
    size_t qualname_len = 0;
    char metaclass[128] = {};
    size_t metaclass_len = 0;
    char name_copy[128] = {};  // tp_name, the qualname of a class that has none
};
bool read_ready_class_names(const void* type, ClassNames& out);

}  // namespace growtrace::preload::python
