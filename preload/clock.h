// Event timestamps. The TSC is constant and synchronised across cores on the machines we
// support (constant_tsc, nonstop_tsc); reading it costs a few nanoseconds and needs no shared
// state, which is what lets per-thread buffers be merged by time without a global counter.
#pragma once

#include <cstdint>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace growtrace::preload {

inline uint64_t now_ticks() {
#if defined(__x86_64__)
    return __rdtsc();
#else
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
#endif
}

// An event's time, read once the event's place in its thread's buffer is taken: fenced, so that
// the read happens after everything before it (the allocator's call, the lock) and before
// everything after (handing the block over). The writer merges threads by these times and
// decides a free only once every thread has caught up with it (event_merger.h): an
// allocation handed to another thread and freed there is always earlier than its free.
inline uint64_t event_ticks() {
#if defined(__x86_64__)
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
#else
    return now_ticks();
#endif
}

inline uint64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

inline uint64_t realtime_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

}  // namespace growtrace::preload
