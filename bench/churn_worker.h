// bench_malloc_heavy's workload, one thread's share: malloc/free pairs of mixed sizes (16 B to
// 2 KiB) from call depths 1 to 9, with a working set of 64 blocks kept alive so that frees are
// not all immediate. `Hooks` is called where a tracer's hooks would be (bench_event_floor
// measures parts of the tracer there); bench_malloc_heavy itself passes NoHooks.
#pragma once

#include <cstdlib>

struct NoHooks {
    void on_alloc(void*, size_t) {}
    void on_free(void*) {}
};

template <class Hooks>
struct ChurnWorker {
    static constexpr int kSlots = 64;
    void* slots[kSlots] = {};
    unsigned long long checksum = 0;
    unsigned state;
    Hooks& hooks;

    ChurnWorker(unsigned seed, Hooks& h) : state(seed), hooks(h) {}

    unsigned next() {
        state = state * 1103515245u + 12345u;
        return state >> 8;
    }

    __attribute__((noinline)) void allocate_at(int depth) {
        if (depth > 0) {
            allocate_at(depth - 1);
            asm volatile("" ::: "memory");  // keep the recursion a real call chain
            return;
        }
        unsigned r = next();
        size_t size = 16u << (r % 8);  // 16 B .. 2 KiB
        int slot = static_cast<int>(r >> 4) % kSlots;
        if (slots[slot]) hooks.on_free(slots[slot]);
        free(slots[slot]);
        auto* p = static_cast<unsigned char*>(malloc(size));
        hooks.on_alloc(p, size);
        p[0] = static_cast<unsigned char>(r);
        checksum += p[0];
        slots[slot] = p;
    }

    // `pairs` pairs, then the working set freed.
    void run(long pairs) {
        for (long i = 0; i < pairs; ++i) allocate_at(1 + static_cast<int>(next() % 9));
        for (void*& p : slots) {
            free(p);
            p = nullptr;
        }
    }
};
