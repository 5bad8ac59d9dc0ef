#include "preload/unwinder.h"

#include <dlfcn.h>
#include <link.h>

#include "preload/descriptors.h"
#include "preload/got_patcher.h"
#include "preload/log.h"

namespace growtrace::preload {
namespace {
using BacktraceFn = int (*)(void**, int);
using CachingPolicyFn = int (*)(void*, int);

BacktraceFn g_backtrace = nullptr;
uintptr_t g_self_begin = 0;  // text range of libgrowtrace.so, to drop our own frames
uintptr_t g_self_end = 0;

int find_self(dl_phdr_info* info, size_t, void* data) {
    auto self = reinterpret_cast<uintptr_t>(data);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
        uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
        if (self >= begin && self < begin + ph.p_memsz) {
            g_self_begin = begin;
            g_self_end = begin + ph.p_memsz;
            return 1;
        }
    }
    return 0;
}
}  // namespace

bool unwinder_init() {
    void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        log_line("cannot load libunwind.so.8 (%s); tracing disabled", dlerror());
        return false;
    }
    g_backtrace = reinterpret_cast<BacktraceFn>(dlsym(lib, "unw_backtrace"));
    auto set_policy = reinterpret_cast<CachingPolicyFn>(dlsym(lib, "_ULx86_64_set_caching_policy"));
    auto* address_space = static_cast<void**>(dlsym(lib, "_ULx86_64_local_addr_space"));
    if (!g_backtrace) {
        log_line("libunwind.so.8 has no unw_backtrace; tracing disabled");
        return false;
    }
    // libunwind checks addresses by writing them to a pipe of its own, which it creates when it
    // initialises (below) and again whenever the program closed it: out of the program's way.
    got_redirect_in_object(reinterpret_cast<void*>(g_backtrace), "pipe2",
                           reinterpret_cast<void*>(&pipe2_out_of_the_way));
    // Per-thread caching keeps unwinding lock-free across threads (UNW_CACHE_PER_THREAD = 2).
    if (set_policy && address_space) set_policy(*address_space, 2);
    dl_iterate_phdr(find_self, reinterpret_cast<void*>(&unwinder_init));
    return true;
}

// Our own frames are dropped wherever they are: the hooks at the innermost end, and
// main_then_exiting (hooks.cpp), which runs the program's main, at the outermost.
int capture_stack(uint64_t* ips, int max_frames) {
    void* raw[kMaxFrames + 8];
    int n = g_backtrace(raw, kMaxFrames + 8);
    int count = 0;
    for (int i = 0; i < n && count < max_frames; ++i) {
        auto ip = reinterpret_cast<uintptr_t>(raw[i]);
        if (ip >= g_self_begin && ip < g_self_end) continue;
        ips[count++] = ip;
    }
    return count;
}

}  // namespace growtrace::preload
