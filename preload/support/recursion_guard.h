// Per-thread re-entrancy flag. Everything the tracer does while recording (unwinding,
// dlsym, zstd, pthread_setspecific) may itself allocate; those allocations must go straight
// to the original allocator. initial-exec TLS: reading it never allocates or takes a lock,
// unlike the general-dynamic model whose first access calls __tls_get_addr -> malloc.
#pragma once

namespace growtrace::preload {

extern __thread bool t_in_tracer __attribute__((tls_model("initial-exec")));

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
