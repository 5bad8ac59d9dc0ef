// The functions growtrace interposes whose originals are looked up together: the allocation
// functions (also the GOT slots an attach redirects, attach.cpp) and the process functions.
// Each entry generates the declaration of the original, its slot in the table of originals
// and the dlsym lookup. hooks.cpp interposes more than these lists: fork and exit (their
// originals resolved beside them), execl/execlp/execle (rebuilt into execv/execvp/execve) and
// __libc_start_main (looked up when called).
//   GT_HOOK(name, return type, parameter list)
#pragma once

#include <cstddef>

#define GT_ALLOCATION_HOOKS(GT_HOOK)                                        \
    GT_HOOK(malloc, void*, (size_t))                                        \
    GT_HOOK(free, void, (void*))                                            \
    GT_HOOK(calloc, void*, (size_t, size_t))                                \
    GT_HOOK(realloc, void*, (void*, size_t))                                \
    GT_HOOK(reallocarray, void*, (void*, size_t, size_t))                   \
    GT_HOOK(posix_memalign, int, (void**, size_t, size_t))                  \
    GT_HOOK(aligned_alloc, void*, (size_t, size_t))                         \
    GT_HOOK(memalign, void*, (size_t, size_t))                              \
    GT_HOOK(valloc, void*, (size_t))                                        \
    GT_HOOK(pvalloc, void*, (size_t))

#define GT_PROCESS_HOOKS(GT_HOOK)                                           \
    GT_HOOK(execve, int, (const char*, char* const*, char* const*))         \
    GT_HOOK(execv, int, (const char*, char* const*))                        \
    GT_HOOK(execvp, int, (const char*, char* const*))                       \
    GT_HOOK(execvpe, int, (const char*, char* const*, char* const*))        \
    GT_HOOK(dlclose, int, (void*))
