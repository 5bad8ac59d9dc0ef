// Reading memory the library did not allocate (the program's objects, a C extension's static
// data) without ever faulting. The interposed functions see objects that CPython, Cython or a C
// extension may have left half set up (a static type flagged as a heap type while it is made
// ready, a NULL name or dict, a slot pointing anywhere); a load from such a pointer would kill
// the program. Every such load goes through here: the copy is made by the kernel
// (process_vm_readv on the calling thread), which answers EFAULT for memory that is not
// mapped or not readable, and the caller then skips the object.
#pragma once

#include <cstddef>
#include <cstdint>

namespace growtrace::preload::python {

// Whether checked reads work in this process (a seccomp policy may refuse process_vm_readv).
// Where they do not, every checked read fails and the objects are skipped.
bool checked_reads_work();

// Copies `size` bytes at `address` to `out`; false (out unspecified) unless all were readable.
bool copy_checked(const void* address, void* out, size_t size);

// Copies what can be read of the `size` bytes at `address`, stopping at the first page that
// cannot be; returns how many bytes were copied.
size_t copy_readable_prefix(const void* address, void* out, size_t size);

// One field of an object, checked: false if `object` is null or the field unreadable.
template <typename T>
inline bool read_field(const void* object, size_t offset, T& out) {
    if (!object) return false;
    return copy_checked(static_cast<const char*>(object) + offset, &out, sizeof out);
}

}  // namespace growtrace::preload::python
