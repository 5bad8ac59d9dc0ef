// Redirects calls to chosen functions in already-loaded objects by rewriting their GOT slots
// (attach mode: the library was dlopen'ed into a running process, so symbol interposition
// cannot reach the objects that are already bound).
//
// Preconditions: Linux, x86-64, ELF objects visible to dl_iterate_phdr. Only R_X86_64_JUMP_SLOT
// and R_X86_64_GLOB_DAT relocations are patched (calls through the PLT and address loads through
// the GOT); a function pointer stored in data (R_X86_64_64) keeps the original. A slot is only
// patched when it holds the process-wide definition (dlsym(RTLD_DEFAULT)) or the object's own
// lazy-binding stub, so objects bound elsewhere (RTLD_DEEPBIND, a private allocator) are left
// alone. Slots inside PT_GNU_RELRO are made writable for the write and read-only again.
// Writes are single aligned 8-byte stores: a thread calling through the slot sees the old or
// the new target, never a torn one.
#pragma once

#include <cstddef>

namespace growtrace::preload {

struct GotTarget {
    const char* name;   // symbol named by the relocation
    void* replacement;  // what the slot gets
    // Also in libc's own GOT: glibc calls malloc, free, calloc and realloc through its GOT
    // (so that a replacement allocator serves libc too: strdup, fopen, getline...), and a
    // slot there is what makes those allocations visible while attached.
    bool in_libc = false;
};

// Patches every loaded object not yet patched (skipping `self_base`'s object and the dynamic
// loader; in libc only the targets marked in_libc). Cheap when no object was loaded since the
// last call. The slots are found first and written only after the scan: with `all_or_nothing`,
// a scan that does not fit the table writes none (an attach that fails changes nothing);
// otherwise those that fit are written. Returns the number of slots patched by this call, or
// -1 if the table of patched slots is full.
int got_patch_loaded(const GotTarget* targets, int count, unsigned long self_base, bool all_or_nothing = false);

// For the tests (GROWTRACE_TEST_ATTACH_FAIL=patch): the table holds at most `limit` slots
// (0: its real size), so that a scan does not fit.
void got_patcher_limit_slots_for_test(int limit);

// Puts back the original value of every slot still holding its replacement, in objects still
// loaded, and forgets them all. Returns the number of slots restored.
int got_restore_all();

// In a forked child: a thread of the parent may have held the patcher's lock.
void got_patcher_child_after_fork();

// Slots currently patched.
int got_patched_count();

// Points the slots for `name` of the one object that contains `address` at `replacement`, for
// good (not undone by got_restore_all). For the libraries the tracer loads itself. Returns the
// number of slots changed.
int got_redirect_in_object(const void* address, const char* name, void* replacement);

}  // namespace growtrace::preload
