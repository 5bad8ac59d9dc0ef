/* libgrowtrace-gdb-xstate.so: preloaded into the gdb that `growtrace attach` runs (never into
 * the program attached to; tools/attach/gdb_session.cpp), so that gdb releases older than 14
 * can write a thread's registers on a CPU whose XSAVE state is larger than they know.
 *
 * gdb 13 reads and writes the NT_X86_XSTATE regset through a buffer of a fixed size (enough for
 * everything up to AVX-512 and PKRU, about 2.7 KB). With AMX, the kernel's XSAVE state is
 * larger (11008 bytes with the tile data), and Linux refuses a PTRACE_SETREGSET of that regset
 * unless it is given the whole state: gdb then cannot put back any vector register, so every
 * inferior call fails ("Couldn't write extended state status: Bad address") after the called
 * function already ran, and the program goes on with clobbered registers.
 *
 * This library defines ptrace. For a PTRACE_SETREGSET of NT_X86_XSTATE shorter than the
 * kernel's state, it reads the thread's whole state, lays gdb's buffer over its start and
 * writes the whole state back. That is exact: the regset is in the standard (non-compacted)
 * XSAVE layout, where the legacy area, the header and every component gdb knows lie at the
 * same offsets whatever the size, and the components past gdb's buffer (AMX tiles) keep the
 * values the thread has. Every other request goes to libc's ptrace unchanged. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef long (*ptrace_function)(enum __ptrace_request request, ...);

/* The XSAVE state is read into a buffer of this size first, doubled while the kernel fills
 * it to the last byte, up to the limit (past it, gdb's request is passed on as it is). */
enum { kFirstReadSize = 16 * 1024, kLargestState = 4 * 1024 * 1024 };

static ptrace_function next_ptrace(void) {
    static ptrace_function found;
    if (found == NULL) found = (ptrace_function)dlsym(RTLD_NEXT, "ptrace");
    return found;
}

/* The thread's whole XSAVE state, malloc'ed, with its size in iov_len; iov_base is NULL if it
 * cannot be read. */
static struct iovec read_whole_state(ptrace_function real, pid_t tid) {
    for (size_t size = kFirstReadSize; size <= kLargestState; size *= 2) {
        struct iovec state = {malloc(size), size};
        if (state.iov_base == NULL) break;
        if (real(PTRACE_GETREGSET, tid, (void*)(uintptr_t)NT_X86_XSTATE, &state) != 0) {
            free(state.iov_base);
            break;
        }
        if (state.iov_len < size) return state;
        free(state.iov_base);
    }
    struct iovec none = {NULL, 0};
    return none;
}

/* gdb's write of a thread's XSAVE state, `given` shorter than the kernel's: returns the result
 * of writing the whole state with `given` over its start, or 1 if nothing was done (the
 * request is then passed on as it is). */
static long write_state_in_whole(ptrace_function real, pid_t tid, const struct iovec* given) {
    int saved_errno = errno;
    struct iovec whole = read_whole_state(real, tid);
    if (whole.iov_base == NULL || whole.iov_len <= given->iov_len) {
        free(whole.iov_base);
        errno = saved_errno;
        return 1;
    }
    memcpy(whole.iov_base, given->iov_base, given->iov_len);
    long rc = real(PTRACE_SETREGSET, tid, (void*)(uintptr_t)NT_X86_XSTATE, &whole);
    int write_errno = errno;
    free(whole.iov_base);
    errno = rc == 0 ? saved_errno : write_errno;
    return rc;
}

/* glibc's signature. Its ptrace always takes pid, addr and data (and, for PTRACE_PEEK*,
 * returns the word read), which is why the three are passed on in every case. */
long ptrace(enum __ptrace_request request, ...) {
    va_list args;
    va_start(args, request);
    pid_t pid = va_arg(args, pid_t);
    void* addr = va_arg(args, void*);
    void* data = va_arg(args, void*);
    va_end(args);

    ptrace_function real = next_ptrace();
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (request == PTRACE_SETREGSET && (uintptr_t)addr == NT_X86_XSTATE && data != NULL) {
        long rc = write_state_in_whole(real, pid, (const struct iovec*)data);
        if (rc != 1) return rc;
    }
    return real(request, pid, addr, data);
}
