#include "preload/python/walk_request.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "preload/support/recursion_guard.h"

namespace growtrace::preload::python {
namespace {

void (*volatile g_tick)(void) = nullptr;
std::atomic<bool> g_walks_stopped{false};

}  // namespace

std::atomic<bool> g_walk_wanted{false};

void set_walk_tick(void (*tick)(void)) { g_tick = tick; }

void want_walk() {
    if (g_tick && !g_walks_stopped.load(std::memory_order_relaxed)) g_walk_wanted.store(true, std::memory_order_relaxed);
}

void stop_walks() { g_walks_stopped.store(true, std::memory_order_relaxed); }
void allow_walks() { g_walks_stopped.store(false, std::memory_order_relaxed); }

// Only the main thread: a pending call reaches the evaluation loop at once only when the main
// thread queues it (CPython 3.10 to 3.12 compute the "break in" flag for the calling thread).
void request_walk() {
    static thread_local int8_t is_main = -1;
    if (is_main < 0) is_main = syscall(SYS_gettid) == getpid();
    if (!is_main) return;
    g_walk_wanted.store(false, std::memory_order_relaxed);
    RecursionGuard guard;
    if (void (*tick)(void) = g_tick; tick && !g_walks_stopped.load(std::memory_order_relaxed)) tick();
}

}  // namespace growtrace::preload::python
