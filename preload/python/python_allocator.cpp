#include "preload/python/python_allocator.h"


#include <atomic>

#include "preload/python/python_frames.h"
#include "preload/recorder.h"
#include "preload/recursion_guard.h"
#include "preload/sampler.h"

namespace growtrace::preload::python {
namespace {

constexpr AllocatorDomain kDomains[2] = {AllocatorDomain::Mem, AllocatorDomain::Object};
MemAllocator g_original[2];
std::atomic<bool> g_installed{false};
std::atomic<bool> g_allowed{true};

MemAllocator& original(void* ctx) { return *static_cast<MemAllocator*>(ctx); }

// The original allocator may itself call malloc (pymalloc does for large blocks): the guard
// keeps that inner call from being recorded a second time.
// Sampled mode: `sample` counts the bytes once and decides (preload/sampler.h).
void* hooked_malloc(void* ctx, size_t size) {
    MemAllocator& o = original(ctx);
    PythonAllocationSample sample(size);
    if (!sample || t_in_tracer || !tracer_active()) return o.malloc(o.ctx, size);
    RecursionGuard guard;
    void* p = o.malloc(o.ctx, size);
    if (p) record_python_alloc(p, size);
    return p;
}

void* hooked_calloc(void* ctx, size_t count, size_t size) {
    MemAllocator& o = original(ctx);
    PythonAllocationSample sample(count * size);
    if (!sample || t_in_tracer || !tracer_active()) return o.calloc(o.ctx, count, size);
    RecursionGuard guard;
    void* p = o.calloc(o.ctx, count, size);
    if (p) record_python_alloc(p, count * size);
    return p;
}

void* hooked_realloc(void* ctx, void* ptr, size_t size) {
    MemAllocator& o = original(ctx);
    PythonAllocationSample sample(size);
    if ((!sample && !(ptr && sample_maybe_live(ptr))) || t_in_tracer || !tracer_active())
        return o.realloc(o.ctx, ptr, size);
    RecursionGuard guard;
    FreeBeforeResize old(ptr);  // before the call: the address may be reused at once
    void* p = o.realloc(o.ctx, ptr, size);
    if (p) {
        if (sample) record_python_alloc(p, size);
    } else if (ptr && !old.take_back()) {
        // A failed PyMem_Realloc never frees the old block (not even for size 0), but its
        // size is the allocator's secret: recorded alive again, without bytes.
        record_python_alloc(ptr, 0);
    }
    return p;
}

void hooked_free(void* ctx, void* ptr) {
    MemAllocator& o = original(ctx);
    if (ptr && sample_maybe_live(ptr) && !t_in_tracer && tracer_active()) {
        RecursionGuard guard;
        record_free(ptr);
        o.free(o.ctx, ptr);
        return;
    }
    o.free(o.ctx, ptr);
}

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
    return true;
}

void uninstall_allocator_hooks() {
    if (!g_installed.load(std::memory_order_relaxed)) return;
    const CApi& api = interpreter().api;
    for (int i = 0; i < 2; ++i) {
        MemAllocator current;
        api.get_allocator(kDomains[i], &current);
        if (current.malloc == hooked_malloc && current.ctx == &g_original[i]) api.set_allocator(kDomains[i], &g_original[i]);
    }
    g_installed.store(false, std::memory_order_relaxed);
}

}  // namespace growtrace::preload::python
