// Per-thread re-entrancy flag. Everything the tracer does while recording (unwinding,
// dlsym, zstd, pthread_setspecific) may itself allocate; those allocations must go straight
// to the original allocator. initial-exec TLS: reading it never allocates or takes a lock,
// unlike the general-dynamic model whose first access calls __tls_get_addr -> malloc.
#pragma once

#include <cstdint>

namespace growtrace::preload {

extern __thread bool t_in_tracer __attribute__((tls_model("initial-exec")));

// The CPython agent's own work (its container walks, its start and detach when attached) runs
// Python code on a program thread or one of ours. What it allocates is not the program's, but
// what it frees may be: the walk holds references to program objects (every tracked object in
// its heap pass, a cache's newest entries), and when another thread drops one meanwhile, the
// walk's reference is the last and the object is freed inside the walk. So while this is set
// allocations are not recorded and frees are (a free of the agent's own block is an untraced
// free, which the ledger counts as such).
extern __thread bool t_agent_work __attribute__((tls_model("initial-exec")));

// Whether an allocation or a free of the calling thread belongs to the program.
inline bool program_allocates() { return !t_in_tracer && !t_agent_work; }
inline bool program_frees() { return !t_in_tracer; }

// A Python allocator hook calls the allocator it wraps (pymalloc) with the guard held. pymalloc
// may call malloc for the hook's own block, which the hook records once; but it also frees
// blocks of its own that were recorded before the hooks wrapped it (its table of arenas, made
// during the interpreter's start, is freed when the table grows). While a hook's call runs,
// the native hooks record the free of any block but `t_wrapped_block`, the one the hook itself
// frees or resizes (0: none).
extern __thread bool t_in_wrapped_allocator __attribute__((tls_model("initial-exec")));
extern __thread uintptr_t t_wrapped_block __attribute__((tls_model("initial-exec")));

class WrappedAllocatorCall {
public:
    explicit WrappedAllocatorCall(const void* own_block = nullptr)
        : was_in_(t_in_wrapped_allocator), was_block_(t_wrapped_block) {
        t_in_wrapped_allocator = true;
        t_wrapped_block = reinterpret_cast<uintptr_t>(own_block);
    }
    ~WrappedAllocatorCall() {
        t_in_wrapped_allocator = was_in_;
        t_wrapped_block = was_block_;
    }
    WrappedAllocatorCall(const WrappedAllocatorCall&) = delete;
    WrappedAllocatorCall& operator=(const WrappedAllocatorCall&) = delete;

private:
    bool was_in_;
    uintptr_t was_block_;
};

// Whether a free of `ptr` is to be recorded: the program's, or one the wrapped allocator makes
// of another block than its hook's.
inline bool records_free_of(const void* ptr) {
    return program_frees() || (t_in_wrapped_allocator && reinterpret_cast<uintptr_t>(ptr) != t_wrapped_block);
}

// The tracer's own work. Also when it runs inside a wrapped allocator's call (a native hook
// recording a free that pymalloc makes): nothing it calls is recorded, as the allocator's or
// anyone's.
class RecursionGuard {
public:
    RecursionGuard() : was_set_(t_in_tracer), was_wrapped_(t_in_wrapped_allocator) {
        t_in_tracer = true;
        t_in_wrapped_allocator = false;
    }
    ~RecursionGuard() {
        t_in_tracer = was_set_;
        t_in_wrapped_allocator = was_wrapped_;
    }
    RecursionGuard(const RecursionGuard&) = delete;
    RecursionGuard& operator=(const RecursionGuard&) = delete;

    // True when the guard was already held: the caller is the tracer itself.
    bool nested() const { return was_set_; }

private:
    bool was_set_;
    bool was_wrapped_;
};

}  // namespace growtrace::preload
