// The functions growtrace interposes whose originals are looked up together: the allocation
// functions and the functions of the process's life. An attach redirects every one of them
// (attach.cpp). Each entry generates the declaration of the original, its slot in the table
// of originals and the dlsym lookup. hooks.cpp also interposes execl/execlp/execle (rebuilt
// into the exec functions above) and __libc_start_main (looked up when called).
//   GT_HOOK(name, return type, parameter list)
#pragma once

#include <sys/types.h>

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

// The other interposed functions of the process's life.
#define GT_PROCESS_HOOKS(GT_HOOK)                                           \
    GT_HOOK(fork, pid_t, ())                                                \
    GT_HOOK(exit, void, (int))                                              \
    GT_HOOK(_exit, void, (int))                                             \
    GT_HOOK(_Exit, void, (int))                                             \
    GT_HOOK(execve, int, (const char*, char* const*, char* const*))         \
    GT_HOOK(execv, int, (const char*, char* const*))                        \
    GT_HOOK(execvp, int, (const char*, char* const*))                       \
    GT_HOOK(execvpe, int, (const char*, char* const*, char* const*))        \
    GT_HOOK(dlclose, int, (void*))

// Interposed too, with no original of their own: the list forms of exec pass on to the vector
// forms above.
#define GT_FORWARDING_HOOK_NAMES "execl", "execlp", "execle"

// Attach mode redirects every hook a preloaded library interposes (all but __libc_start_main,
// which has run long before): the same names, for the GOT patcher.
#define GT_NAME_OF_HOOK(name, ret, params) #name,
#define GT_ALL_HOOK_NAMES \
    GT_ALLOCATION_HOOKS(GT_NAME_OF_HOOK) GT_PROCESS_HOOKS(GT_NAME_OF_HOOK) GT_FORWARDING_HOOK_NAMES
