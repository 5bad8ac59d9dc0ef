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

// The CLOCK_REALTIME deadline `ms` from now, as pthread_cond_timedwait takes it.
inline timespec after_ms(unsigned ms) {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t ns = uint64_t(t.tv_nsec) + uint64_t(ms) * 1000000u;
    t.tv_sec += static_cast<time_t>(ns / 1000000000u);
    t.tv_nsec = static_cast<long>(ns % 1000000000u);
    return t;
}

inline uint64_t now_ticks() {
#if defined(__x86_64__)
    return __rdtsc();
#else
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
#endif
}

// An event's time, read once the event's place in its thread's buffer is taken. RDTSCP waits
// for every instruction before it (the lock, the allocator's call) to have executed, so the time
// is never read before the thread holds its state: the writer, which reads its own time before
// taking each thread's lock, can count a thread it collected as caught up to that time
// (event_merger.h). A later store that hands the block to another thread retires after it, so
// an allocation is always earlier than its free, whichever thread frees it.
inline uint64_t event_ticks() {
#if defined(__x86_64__)
    unsigned aux;
    return __rdtscp(&aux);
#else
    return now_ticks();
#endif
}

// The writer's time for a collection: fenced both ways, read before any thread's lock is tried.
inline uint64_t collection_ticks() {
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
