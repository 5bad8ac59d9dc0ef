#include "preload/python/python_allocator.h"

#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "preload/python/walk_request.h"
#include "preload/cpython/checked_read.h"
#include "preload/cpython/python_frames.h"
#include "preload/record/recorder.h"
#include "preload/support/recursion_guard.h"
#include "preload/record/sampler.h"

namespace growtrace::preload::python {
namespace {

constexpr AllocatorDomain kDomains[2] = {AllocatorDomain::Mem, AllocatorDomain::Object};
MemAllocator g_original[2];
std::atomic<bool> g_installed{false};
std::atomic<bool> g_allowed{true};

MemAllocator& original(void* ctx) { return *static_cast<MemAllocator*>(ctx); }

bool ours(const MemAllocator& a, int domain);

// sys._debugmallocstats() prints pymalloc's statistics only while pymalloc's own functions
// are the object domain's allocator (_PyMem_PymallocEnabled compares the pointers), which our
// hooks hide: traced, it printed none. Its entry in CPython's method table of `sys` (writable
// data, shared by every sys module of the process) is pointed at a stand-in that puts the
// original allocators back for the call. The function keeps its type, name, doc and
// signature; nothing of Python's is made.
std::atomic<Object* (*)(Object*, Object*)> g_debug_malloc_stats{nullptr};
std::atomic<bool> g_route_pending{false};

// Called as sys._debugmallocstats, so with the GIL held (PyMem_SetAllocator needs it for
// these domains), which CPython's function keeps: no other thread allocates meanwhile.
Object* debug_malloc_stats_untraced(Object* self, Object* args) {
    const CApi& api = interpreter().api;
    MemAllocator current[2];
    bool swapped[2] = {};
    for (int i = 0; i < 2; ++i) {
        api.get_allocator(kDomains[i], &current[i]);
        swapped[i] = ours(current[i], i);
        if (swapped[i]) api.set_allocator(kDomains[i], &g_original[i]);
    }
    Object* result = g_debug_malloc_stats.load(std::memory_order_relaxed)(self, args);
    for (int i = 0; i < 2; ++i)
        if (swapped[i]) api.set_allocator(kDomains[i], &current[i]);
    return result;
}

// Once, from the first hooked allocation outside the tracer with a Python frame running (the
// GIL held, as the domains require): looking `sys` up makes a string, which must not happen
// inside the allocators, where the hooks are installed.
void route_debug_malloc_stats() {
    RecursionGuard guard;
    FrameRef probe;
    if (!interpreter().api.is_initialized() || interpreter().api.is_finalizing() || capture(&probe, 1) == 0) return;
    g_route_pending.store(false, std::memory_order_relaxed);
    const CApi& api = interpreter().api;
    Object* function = api.sys_get("_debugmallocstats");
    // The program may have put anything there: every read is checked.
    Object* type = nullptr;
    MethodDef* entry = nullptr;
    MethodDef method{};
    char name[sizeof "_debugmallocstats"] = {};
    if (!read_field(function, layout().object_type, type) || type != api.cfunction_type ||
        !read_field(function, layout().cfunction_method, entry) || !copy_checked(entry, &method, sizeof method) ||
        method.flags != kMethNoArgs || !copy_checked(method.name, name, sizeof name) ||
        memcmp(name, "_debugmallocstats", sizeof name) != 0)
        return;
    if (method.function == debug_malloc_stats_untraced) return;  // an earlier trace of this process did
    g_debug_malloc_stats.store(method.function, std::memory_order_relaxed);
    // Through the kernel: a table in read-only memory is left alone instead of faulting.
    Object* (*stand_in)(Object*, Object*) = debug_malloc_stats_untraced;
    iovec local = {&stand_in, sizeof stand_in};
    iovec remote = {&entry->function, sizeof entry->function};
    process_vm_writev(getpid(), &local, 1, &remote, 1, 0);
}

// The original allocator may itself call malloc (pymalloc does for large blocks): the guard
// keeps that inner call from being recorded a second time, while a free it makes of another
// block is recorded (WrappedAllocatorCall, recursion_guard.h).

// Sampled mode: `sample` counts the bytes once and decides (preload/record/sampler.h).
void* hooked_malloc(void* ctx, size_t size) {
    MemAllocator& o = original(ctx);
    if (g_route_pending.load(std::memory_order_relaxed) && program_allocates()) [[unlikely]]
        route_debug_malloc_stats();
    if (g_walk_wanted.load(std::memory_order_relaxed) && program_allocates()) [[unlikely]]
        request_walk();
    PythonAllocationSample sample(size);
    if (!sample || !program_allocates() || !tracer_active()) return o.malloc(o.ctx, size);
    RecursionGuard guard;
    void* p;
    {
        WrappedAllocatorCall call;
        p = o.malloc(o.ctx, size);
    }
    if (p) record_python_alloc(p, size);
    return p;
}

void* hooked_calloc(void* ctx, size_t count, size_t size) {
    MemAllocator& o = original(ctx);
    PythonAllocationSample sample(count * size);
    if (!sample || !program_allocates() || !tracer_active()) return o.calloc(o.ctx, count, size);
    RecursionGuard guard;
    void* p;
    {
        WrappedAllocatorCall call;
        p = o.calloc(o.ctx, count, size);
    }
    if (p) record_python_alloc(p, count * size);
    return p;
}

void* hooked_realloc(void* ctx, void* ptr, size_t size) {
    MemAllocator& o = original(ctx);
    PythonAllocationSample sample(size);
    const bool record_new = sample && program_allocates();
    if ((!record_new && !(ptr && sample_maybe_live(ptr))) || !program_frees() || !tracer_active())
        return o.realloc(o.ctx, ptr, size);
    RecursionGuard guard;
    FreeBeforeResize old(ptr);  // before the call: the address may be reused at once
    void* p;
    {
        WrappedAllocatorCall call(ptr);
        p = o.realloc(o.ctx, ptr, size);
    }
    if (p) {
        if (record_new) record_python_alloc(p, size);
    } else if (ptr && !old.take_back()) {
        // A failed PyMem_Realloc never frees the old block (not even for size 0), but its
        // size is the allocator's secret: recorded alive again, without bytes.
        record_python_alloc(ptr, 0);
    }
    return p;
}

void hooked_free(void* ctx, void* ptr) {
    MemAllocator& o = original(ctx);
    if (ptr && sample_maybe_live(ptr) && program_frees() && tracer_active()) {
        RecursionGuard guard;
        record_free(ptr);
        WrappedAllocatorCall call(ptr);
        o.free(o.ctx, ptr);
        return;
    }
    o.free(o.ctx, ptr);
}

bool ours(const MemAllocator& a, int domain) { return a.malloc == hooked_malloc && a.ctx == &g_original[domain]; }

}  // namespace

void allow_allocator_hooks(bool allowed) { g_allowed.store(allowed, std::memory_order_relaxed); }

bool install_allocator_hooks() {
    if (g_installed.load(std::memory_order_relaxed)) return true;
    if (!g_allowed.load(std::memory_order_relaxed)) return false;
    if (!initialized()) return false;
    FrameRef probe_frame;
    if (capture(&probe_frame, 1) == 0) return false;  // not initialised, or GIL not held here
    const CApi& api = interpreter().api;
    for (int i = 0; i < 2; ++i) {
        api.get_allocator(kDomains[i], &g_original[i]);
        MemAllocator hooks = {&g_original[i], hooked_malloc, hooked_calloc, hooked_realloc, hooked_free};
        api.set_allocator(kDomains[i], &hooks);
    }
    g_installed.store(true, std::memory_order_relaxed);
    if (!g_debug_malloc_stats.load(std::memory_order_relaxed)) g_route_pending.store(true, std::memory_order_relaxed);
    return true;
}

void uninstall_allocator_hooks() {
    if (!g_installed.load(std::memory_order_relaxed)) return;
    const CApi& api = interpreter().api;
    for (int i = 0; i < 2; ++i) {
        MemAllocator current;
        api.get_allocator(kDomains[i], &current);
        if (ours(current, i)) api.set_allocator(kDomains[i], &g_original[i]);
    }
    g_installed.store(false, std::memory_order_relaxed);
}

}  // namespace growtrace::preload::python
