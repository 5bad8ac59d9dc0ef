// A slow leak amid heavy churn: each of THREADS threads, per iteration, allocates and frees
// CHURN blocks of varied sizes and keeps one 256-byte block from leak_a_little in its own
// global list (whose storage is reserved up front, so the list itself never reallocates).
// After the run exactly THREADS * ITERATIONS blocks of LEAK_SIZE (256) bytes are retained, all
// allocated at the LINE-MARK in leak_a_little.
//
// usage: slow_leak_threads [THREADS=4] [ITERATIONS=400] [CHURN=200] [SLEEP_US=4000] [LEAK_SIZE=256]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

size_t kLeakSize = 256;  // LEAK_SIZE
constexpr int kMaxThreads = 64;

std::vector<void*> g_kept[kMaxThreads];

__attribute__((noinline)) void leak_a_little(int thread_index) {
    void* block = malloc(kLeakSize);  // LINE-MARK: leak_a_little
    memset(block, thread_index, kLeakSize);
    g_kept[thread_index].push_back(block);
}

__attribute__((noinline)) unsigned long churn_once(unsigned long& state, long count) {
    unsigned long sum = 0;
    std::vector<char*> live;
    live.reserve(static_cast<size_t>(count));
    for (long i = 0; i < count; ++i) {
        state = state * 6364136223846793005UL + 1442695040888963407UL;
        size_t size = 8 + (state >> 33) % 2048;
        char* p = static_cast<char*>(malloc(size));
        p[0] = static_cast<char>(i);
        live.push_back(p);
    }
    for (char* p : live) {
        sum += static_cast<unsigned char>(p[0]);
        free(p);
    }
    return sum;
}

void worker(int index, long iterations, long churn, long sleep_us) {
    unsigned long state = static_cast<unsigned long>(index) + 17;
    unsigned long sum = 0;
    for (long i = 0; i < iterations; ++i) {
        sum += churn_once(state, churn);
        leak_a_little(index);
        if (sleep_us > 0) usleep(static_cast<useconds_t>(sleep_us));
    }
    if (sum == 1) puts("");
}

}  // namespace

int main(int argc, char** argv) {
    long threads = argc > 1 ? atol(argv[1]) : 4;
    long iterations = argc > 2 ? atol(argv[2]) : 400;
    long churn = argc > 3 ? atol(argv[3]) : 200;
    long sleep_us = argc > 4 ? atol(argv[4]) : 4000;
    if (argc > 5) kLeakSize = static_cast<size_t>(atol(argv[5]));
    if (threads < 1 || threads > kMaxThreads) {
        fprintf(stderr, "slow_leak_threads: THREADS must be 1..%d\n", kMaxThreads);
        return 2;
    }
    for (long t = 0; t < threads; ++t) g_kept[t].reserve(static_cast<size_t>(iterations));
    std::vector<std::thread> workers;
    for (long t = 0; t < threads; ++t) workers.emplace_back(worker, static_cast<int>(t), iterations, churn, sleep_us);
    for (auto& w : workers) w.join();
    size_t kept = 0;
    for (long t = 0; t < threads; ++t) kept += g_kept[t].size();
    printf("slow_leak_threads: %zu blocks of %zu bytes kept\n", kept, kLeakSize);
    return 0;
}
