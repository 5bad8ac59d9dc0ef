// Per-thread re-entrancy flag. Everything the tracer does while recording (unwinding,
// dlsym, zstd, pthread_setspecific) may itself allocate; those allocations must go straight
// to the original allocator. initial-exec TLS: reading it never allocates or takes a lock,
// unlike the general-dynamic model whose first access calls __tls_get_addr -> malloc.
#pragma once

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

class RecursionGuard {
public:
    RecursionGuard() : was_set_(t_in_tracer) { t_in_tracer = true; }
    ~RecursionGuard() { t_in_tracer = was_set_; }
    RecursionGuard(const RecursionGuard&) = delete;
    RecursionGuard& operator=(const RecursionGuard&) = delete;

    // True when the guard was already held: the caller is the tracer itself.
    bool nested() const { return was_set_; }

private:
    bool was_set_;
};

}  // namespace growtrace::preload
