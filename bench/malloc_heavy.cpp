// Benchmark workload: two threads, each performing millions of malloc/free pairs of mixed
// sizes from call depths 1 to 9, with a small working set kept alive so frees are not all
// immediate. Prints a checksum so the work cannot be optimised away.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kSlots = 64;

struct Worker {
    void* slots[kSlots] = {};
    unsigned long long checksum = 0;
    unsigned state;

    explicit Worker(unsigned seed) : state(seed) {}

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
        free(slots[slot]);
        auto* p = static_cast<unsigned char*>(malloc(size));
        p[0] = static_cast<unsigned char>(r);
        checksum += p[0];
        slots[slot] = p;
    }

    void run(long pairs) {
        for (long i = 0; i < pairs; ++i) allocate_at(1 + static_cast<int>(next() % 9));
        for (void* p : slots) free(p);
    }
};

}  // namespace

int main(int argc, char** argv) {
    long pairs = argc > 1 ? std::atol(argv[1]) : 2000000;
    Worker a(1), b(2);
    std::thread ta([&] { a.run(pairs); });
    std::thread tb([&] { b.run(pairs); });
    ta.join();
    tb.join();
    std::printf("checksum %llu\n", a.checksum + b.checksum);
    return 0;
}
