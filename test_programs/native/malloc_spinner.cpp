// A single-threaded program that spends nearly all its time inside malloc and free, for
// `growtrace attach`: gdb almost always stops it in the allocator, where the calls gdb makes
// for the tracer (dlopen allocates) must not run. Prints "tick N blocks M" every 100 ms.
//
// usage: malloc_spinner [SECONDS=30]

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "monotonic_seconds.h"

namespace {

constexpr int kSlots = 4096;
void* g_slots[kSlots];

// Churns blocks from 16 bytes to 256 KiB (the largest past the mmap threshold, others growing
// and trimming the heap's top), so the allocator's slow paths are often on the stack too.
__attribute__((noinline)) unsigned long churn(unsigned long seed) {
    unsigned long sum = 0;
    for (int i = 0; i < 2000; ++i) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int slot = static_cast<int>((seed >> 33) % kSlots);
        size_t size = 16u << ((seed >> 20) % 15);
        free(g_slots[slot]);
        g_slots[slot] = malloc(size);
        if (g_slots[slot]) {
            static_cast<char*>(g_slots[slot])[0] = static_cast<char>(i);
            sum += static_cast<unsigned char>(static_cast<char*>(g_slots[slot])[0]);
        }
    }
    return sum;
}

}  // namespace

int main(int argc, char** argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 30;
    double start = monotonic_seconds(), next_tick = start;
    unsigned long tick = 0, seed = 1;
    while (monotonic_seconds() - start < seconds) {
        seed += churn(seed);
        if (monotonic_seconds() >= next_tick) {
            int blocks = 0;
            for (void* p : g_slots) blocks += p != nullptr;
            printf("tick %lu blocks %d\n", tick++, blocks);
            fflush(stdout);
            next_tick += 0.1;
        }
    }
    for (void*& p : g_slots) free(p);
    return 0;
}
