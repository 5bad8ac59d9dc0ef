// The interposed functions: the only symbols libgrowtrace.so exports. Each one passes
// straight to the original when the tracer is not active or when the tracer itself is the
// caller, so the program's behaviour never depends on the tracer's state.
//
// Sampled mode (preload/record/sampler.h): an allocation that is not a sample returns to the original
// allocator after one subtraction from a TLS counter, the very first thing each hook does, and
// a free that is not a sample's after one load of the sampler's filter.
//
// Originals come from dlsym(RTLD_NEXT), which keeps any allocator stacked after us (jemalloc,
// tcmalloc) in charge. dlsym itself may call malloc/calloc before the originals are known:
// those calls are served from a static arena whose blocks are never freed.
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "preload/intercept/attach.h"
#include "preload/capture/cfi_unwinder.h"
#include "preload/intercept/exec_environment.h"
#include "preload/intercept/hook_list.h"
#include "preload/python/attached_agent.h"
#include "preload/python/extension.h"
#include "preload/record/recorder.h"
#include "preload/session/session.h"
#include "preload/support/recursion_guard.h"
#include "preload/record/sampler.h"

using namespace growtrace::preload;

namespace {

struct Originals {
#define GT_DECLARE(name, ret, params) ret(*name) params;
    GT_ALLOCATION_HOOKS(GT_DECLARE)
    GT_PROCESS_HOOKS(GT_DECLARE)
#undef GT_DECLARE
};
Originals g_real;
std::atomic<bool> g_resolved{false};

// --- bootstrap arena for dlsym's own allocations ---
alignas(64) char g_arena[64 * 1024];
std::atomic<size_t> g_arena_used{0};

bool in_arena(const void* p) {
    return p >= static_cast<const void*>(g_arena) && p < static_cast<const void*>(g_arena + sizeof g_arena);
}

void* arena_alloc(size_t size, size_t align = 16) {
    size_t offset = g_arena_used.load();
    size_t start;
    do {
        start = (offset + align - 1) & ~(align - 1);
        if (start + size > sizeof g_arena) return nullptr;
    } while (!g_arena_used.compare_exchange_weak(offset, start + size));
    return g_arena + start;
}

void resolve_originals() {
    static std::atomic<bool> resolving{false};
    if (resolving.exchange(true)) return;  // dlsym re-entered us: the arena serves it
#define GT_RESOLVE(name, ret, params) g_real.name = reinterpret_cast<ret(*) params>(dlsym(RTLD_NEXT, #name));
    GT_ALLOCATION_HOOKS(GT_RESOLVE)
    GT_PROCESS_HOOKS(GT_RESOLVE)
#undef GT_RESOLVE
    g_resolved.store(true, std::memory_order_release);
}

inline bool ready() {
    if (__builtin_expect(g_resolved.load(std::memory_order_acquire), 1)) return true;
    resolve_originals();
    return g_resolved.load(std::memory_order_acquire);
}

inline bool should_trace_free(const void* ptr) { return records_free_of(ptr) && tracer_active(); }

// After sample_skip(): whether to record an allocation of `size` bytes (full mode: whenever
// the tracer runs; sampled mode: also a sample).
inline bool should_record(size_t size) { return sample_take(size) && program_allocates() && tracer_active(); }

// A resize's new block is recorded when it is a sample (every block in full mode) made by the
// program; the old one is recorded freed when it may be a live sample.
inline bool resize_records_new(size_t size) { return !sample_skip(size) && sample_take(size) && program_allocates(); }

// The interposed function's own frame, where the walk of the stack starts (cfi_unwinder.h).
// Taken in the exported function itself, which it gives a frame pointer.
#define GT_CALLER                                                          \
    WalkStart {                                                            \
        reinterpret_cast<uint64_t>(__builtin_return_address(0)),          \
            reinterpret_cast<uint64_t>(__builtin_frame_address(0))         \
    }

void* traced_result(void* p, size_t size, WalkStart caller) {
    if (p) record_alloc(p, size, caller);
    return p;
}

// A realloc failed (with a size: realloc(p, 0) frees p even when it returns null): the old
// block lives on. Its free is taken back; where that is no longer possible the block is
// recorded again, with the size the allocator knows for it.
void old_block_lives_on(FreeBeforeResize& old, void* ptr, WalkStart caller) {
    if (!old.take_back()) record_alloc(ptr, malloc_usable_size(ptr), caller);
}

// Flushes the trace before an exec: the environment the new image gets, as above.
char* const* traced_image_environment(ExecEnvironment& env, char* const* envp) {
    if (!g_session.before_exec()) return envp;
    const char* library = attached_library();
    const Config& config = g_session.config();
    const char* output = g_session.next_image();
    const char* launchers = g_session.next_launchers();
    char spawned[sizeof config.output];
    if (getpid() != g_session.pid()) {
        // A vfork child: its image is a child's, with no launchers.
        output = g_session.spawned_image(spawned, sizeof spawned) ? spawned : "";
        launchers = "";
    }
    if (!library) return env.with_image(envp, output, launchers);
    return env.with_tracer(envp, {library, *output ? output : config.output, config.sample_bytes,
                                  python::attached_agent_extension(), launchers});
}

// The bodies of the exec hooks the list forms pass on to. Called directly: a call to the
// exported name goes through this library's PLT, which in an attached process (the library
// not in the global scope) binds to libc's.
int traced_execve(const char* path, char* const argv[], char* const envp[]) {
    ready();
    ExecEnvironment env;
    char* const* e = traced_image_environment(env, envp);
    return g_real.execve(path, argv, e);
}

int traced_execv(const char* path, char* const argv[]) {
    ready();
    ExecEnvironment env;
    char* const* e = traced_image_environment(env, environ);
    return e == environ ? g_real.execv(path, argv) : g_real.execve(path, argv, e);
}

int traced_execvp(const char* file, char* const argv[]) {
    ready();
    ExecEnvironment env;
    char* const* e = traced_image_environment(env, environ);
    return e == environ ? g_real.execvp(file, argv) : g_real.execvpe(file, argv, e);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* malloc(size_t size) {
    if (sample_skip(size)) [[likely]] return g_real.malloc(size);
    if (!ready()) return arena_alloc(size);
    if (!should_record(size)) return g_real.malloc(size);
    RecursionGuard guard;
    return traced_result(g_real.malloc(size), size, GT_CALLER);
}

__attribute__((visibility("default"))) void free(void* ptr) {
    if (!ptr || in_arena(ptr)) return;
    if (!sample_maybe_live(ptr) || !should_trace_free(ptr)) return g_real.free(ptr);
    RecursionGuard guard;
    record_free(ptr);  // before the real free: the address may be reused at once
    g_real.free(ptr);
}

__attribute__((visibility("default"))) void* calloc(size_t count, size_t size) {
    if (!ready()) {
        size_t total;
        if (__builtin_mul_overflow(count, size, &total)) return nullptr;
        return arena_alloc(total);  // static storage is already zeroed
    }
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) total = ~size_t{0};
    if (sample_skip(total) || !should_record(total)) return g_real.calloc(count, size);
    RecursionGuard guard;
    return traced_result(g_real.calloc(count, size), count * size, GT_CALLER);
}

__attribute__((visibility("default"))) void* realloc(void* ptr, size_t size) {
    if (in_arena(ptr)) {
        // A block from the bootstrap arena moves to the real heap; its old size is unknown,
        // but never larger than what is left of the arena after it.
        void* moved = malloc(size);
        if (moved && size) {
            size_t available = static_cast<size_t>(g_arena + sizeof g_arena - static_cast<char*>(ptr));
            memcpy(moved, ptr, size < available ? size : available);
        }
        return moved;
    }
    if (!ready()) return arena_alloc(size);
    // Sampled: the old block is recorded as freed if it is a sample, the new one is sampled as
    // any allocation of `size` bytes.
    bool sample = resize_records_new(size);
    if ((!sample && !(ptr && sample_maybe_live(ptr))) || !should_trace_free(ptr)) return g_real.realloc(ptr, size);
    RecursionGuard guard;
    FreeBeforeResize old(ptr);
    void* result = g_real.realloc(ptr, size);
    if (result) {
        if (sample) record_alloc(result, size, GT_CALLER);
    } else if (ptr && size) {
        old_block_lives_on(old, ptr, GT_CALLER);
    }
    return result;
}

__attribute__((visibility("default"))) void* reallocarray(void* ptr, size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) {
        errno = ENOMEM;
        return nullptr;
    }
    if (!ready() || !g_real.reallocarray) return realloc(ptr, total);
    bool sample = resize_records_new(total);
    if ((!sample && !(ptr && sample_maybe_live(ptr))) || !should_trace_free(ptr))
        return g_real.reallocarray(ptr, count, size);
    RecursionGuard guard;
    FreeBeforeResize old(ptr);
    void* result = g_real.reallocarray(ptr, count, size);
    if (result) {
        if (sample) record_alloc(result, total, GT_CALLER);
    } else if (ptr && total) {
        old_block_lives_on(old, ptr, GT_CALLER);
    }
    return result;
}

__attribute__((visibility("default"))) int posix_memalign(void** out, size_t alignment, size_t size) {
    if (sample_skip(size)) [[likely]] return g_real.posix_memalign(out, alignment, size);
    if (!ready()) return ENOMEM;
    if (!should_record(size)) return g_real.posix_memalign(out, alignment, size);
    RecursionGuard guard;
    int rc = g_real.posix_memalign(out, alignment, size);
    if (rc == 0) record_alloc(*out, size, GT_CALLER);
    return rc;
}

__attribute__((visibility("default"))) void* aligned_alloc(size_t alignment, size_t size) {
    if (sample_skip(size)) [[likely]] return g_real.aligned_alloc(alignment, size);
    if (!ready()) return arena_alloc(size, alignment <= 4096 ? alignment : 4096);
    if (!should_record(size)) return g_real.aligned_alloc(alignment, size);
    RecursionGuard guard;
    return traced_result(g_real.aligned_alloc(alignment, size), size, GT_CALLER);
}

__attribute__((visibility("default"))) void* memalign(size_t alignment, size_t size) {
    if (sample_skip(size)) [[likely]] return g_real.memalign(alignment, size);
    if (!ready()) return arena_alloc(size, alignment <= 4096 ? alignment : 4096);
    if (!should_record(size)) return g_real.memalign(alignment, size);
    RecursionGuard guard;
    return traced_result(g_real.memalign(alignment, size), size, GT_CALLER);
}

__attribute__((visibility("default"))) void* valloc(size_t size) {
    if (sample_skip(size)) [[likely]] return g_real.valloc(size);
    if (!ready()) return arena_alloc(size, 4096);
    if (!should_record(size)) return g_real.valloc(size);
    RecursionGuard guard;
    return traced_result(g_real.valloc(size), size, GT_CALLER);
}

__attribute__((visibility("default"))) void* pvalloc(size_t size) {
    if (!ready()) return arena_alloc(size, 4096);
    size_t page = static_cast<size_t>(getpagesize());
    size_t rounded = size ? (size + page - 1) & ~(page - 1) : page;  // what pvalloc really hands out
    if (sample_skip(rounded) || !should_record(rounded)) return g_real.pvalloc(size);
    RecursionGuard guard;
    return traced_result(g_real.pvalloc(size), rounded, GT_CALLER);
}

// --- process life cycle ---

__attribute__((visibility("default"))) pid_t fork() {
    ready();
    pid_t pid = g_real.fork();
    if (pid > 0) g_session.forked_in_parent(pid);
    return pid;
}

// An exec'd image that will be traced gets the CPython agent's start-up folder back on its
// PYTHONPATH, and from an attached process all of `growtrace run`'s settings
// (exec_environment.h); the forms without envp then pass environ explicitly.
__attribute__((visibility("default"))) int execve(const char* path, char* const argv[], char* const envp[]) {
    return traced_execve(path, argv, envp);
}

__attribute__((visibility("default"))) int execv(const char* path, char* const argv[]) {
    return traced_execv(path, argv);
}

__attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) {
    return traced_execvp(file, argv);
}

__attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[], char* const envp[]) {
    ready();
    ExecEnvironment env;
    char* const* e = traced_image_environment(env, envp);
    return g_real.execvpe(file, argv, e);
}

// glibc declares `arg` non-null, but execl(path, NULL) is accepted by the kernel and used:
// the check stays.
#pragma GCC diagnostic ignored "-Wnonnull-compare"
// The list forms: glibc's own execl/execlp/execle call execve internally, past our hook, so
// without these the events before the exec were never flushed. Their argument vector is
// rebuilt on the stack (exec must not allocate: it may run in a vfork child).
#define GT_COLLECT_ARGS(first)                                                       \
    va_list count_args;                                                              \
    va_start(count_args, first);                                                     \
    size_t argc = 0;                                                                 \
    if (first) {                                                                     \
        argc = 1;                                                                    \
        while (va_arg(count_args, char*)) ++argc;                                    \
    }                                                                                \
    va_end(count_args);                                                              \
    char** argv = static_cast<char**>(__builtin_alloca((argc + 1) * sizeof(char*))); \
    va_list args;                                                                    \
    va_start(args, first);                                                           \
    if (first) {                                                                     \
        argv[0] = const_cast<char*>(first);                                          \
        for (size_t i = 1; i < argc; ++i) argv[i] = va_arg(args, char*);             \
        (void)va_arg(args, char*); /* the terminating NULL */                        \
    }                                                                                \
    argv[argc] = nullptr;

__attribute__((visibility("default"))) int execl(const char* path, const char* arg, ...) {
    GT_COLLECT_ARGS(arg)
    va_end(args);
    return traced_execv(path, argv);
}

__attribute__((visibility("default"))) int execlp(const char* file, const char* arg, ...) {
    GT_COLLECT_ARGS(arg)
    va_end(args);
    return traced_execvp(file, argv);
}

__attribute__((visibility("default"))) int execle(const char* path, const char* arg, ...) {
    GT_COLLECT_ARGS(arg)
    char* const* envp = va_arg(args, char* const*);
    va_end(args);
    return traced_execve(path, argv, envp);
}
#undef GT_COLLECT_ARGS

// The start of shutdown, for the analyzer (TraceSession::program_exiting): main returning, seen by
// running main inside ours, or exit() called by the program. Static destructors and atexit
// handlers that empty a cache run after it, and do not make a growing cache look bounded.
using MainFn = int (*)(int, char**, char**);
using StartMainFn = int (*)(MainFn, int, char**, void (*)(), void (*)(), void (*)(), void*);
MainFn g_program_main = nullptr;

int main_then_exiting(int argc, char** argv, char** envp) {
    int status = g_program_main(argc, argv, envp);
    g_session.program_exiting();
    return status;
}

__attribute__((visibility("default"))) int __libc_start_main(MainFn main, int argc, char** argv, void (*init)(),
                                                            void (*fini)(), void (*rtld_fini)(), void* stack_end) {
    auto real = reinterpret_cast<StartMainFn>(dlsym(RTLD_NEXT, "__libc_start_main"));
    g_program_main = main;
    return real(main_then_exiting, argc, argv, init, fini, rtld_fini, stack_end);
}

__attribute__((visibility("default"), noreturn)) void exit(int status) {
    ready();
    g_session.program_exiting();
    g_real.exit(status);
    __builtin_unreachable();
}

// _exit and _Exit end the process at once: no atexit handler, no destructor, so the library's
// own end never runs. The events since the last flush would be lost: the trace is ended here.
__attribute__((visibility("default"), noreturn)) void _exit(int status) {
    ready();
    g_session.ending_at_once();
    g_real._exit(status);
    __builtin_unreachable();
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status) {
    ready();
    g_session.ending_at_once();
    g_real._Exit(status);
    __builtin_unreachable();
}

__attribute__((visibility("default"))) int dlclose(void* handle) {
    ready();
    g_session.before_dlclose();
    int result = g_real.dlclose(handle);
    cfi_forget_rules();  // the library's addresses may be another's from now on
    return result;
}

}  // extern "C"

namespace {
__attribute__((constructor)) void growtrace_library_loaded() {
    python::register_extension();  // before any trace begins, preloaded or attached
    ready();
    if (loaded_for_attach()) return;  // `growtrace attach` starts the trace (preload/intercept/attach.cpp)
    g_session.begin(SessionOrigin::Preloaded);
}
__attribute__((destructor)) void growtrace_library_unloading() { g_session.end(); }
}  // namespace
