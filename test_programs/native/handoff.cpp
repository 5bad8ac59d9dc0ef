// Memory handed between threads at speed: producers allocate blocks and pass them through a
// queue that never holds more than 64 to consumers that free them, the shape of a thread pool or
// a hand-off queue. Bounded by construction: the program holds at most 64 blocks in the queue,
// plus the --keep blocks it allocates at the end and keeps (what a ledger check expects to find
// live), however long it runs.
//
// The allocations cross every path of the allocator: sizes in the thread caches, the bins and
// above the mmap threshold; malloc, calloc, posix_memalign, aligned_alloc; some consumers
// realloc a block before they free it. Producers pause now and then (bursts), and each one is
// replaced by a fresh thread every --respawn items (threads start and exit during the run).
//
//   handoff [--producers N] [--consumers M] [--items N] [--keep K] [--respawn R] [--seconds S]
// --seconds S: produce for S seconds instead of --items (for attach), printing "running pid N" first.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr size_t kQueueLimit = 64;
constexpr size_t kSizes[] = {24, 200, 1000, 4000, 40000, 200000};

std::mutex g_mutex;
std::condition_variable g_changed;
std::deque<void*> g_queue;
bool g_done = false;
std::atomic<long> g_produced{0};
std::vector<void*> g_kept;  // what the program still holds at the end

void* make_block(long n) {
    const size_t size = kSizes[n % (sizeof kSizes / sizeof kSizes[0])] + static_cast<size_t>(n % 7);
    void* p = nullptr;
    switch (n % 4) {
        case 0: p = malloc(size); break;
        case 1: p = calloc(1, size); break;
        case 2:
            if (posix_memalign(&p, 64, size) != 0) p = nullptr;
            break;
        default: p = aligned_alloc(128, (size + 127) / 128 * 128); break;
    }
    if (p) memset(p, 1, 16);
    return p;
}

void put(void* block) {
    std::unique_lock<std::mutex> lock(g_mutex);
    g_changed.wait(lock, [] { return g_queue.size() < kQueueLimit; });
    g_queue.push_back(block);
    g_changed.notify_all();
}

// Produces `count` blocks (or until `until`), pausing briefly every 2000.
void produce(long count, std::chrono::steady_clock::time_point until, bool timed) {
    for (long i = 0; timed ? std::chrono::steady_clock::now() < until : i < count; ++i) {
        long n = g_produced.fetch_add(1);
        if (void* p = make_block(n)) put(p);
        if (n % 2000 == 1999) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

void consume(int which) {
    for (long n = 0;; ++n) {
        std::unique_lock<std::mutex> lock(g_mutex);
        g_changed.wait(lock, [] { return !g_queue.empty() || g_done; });
        if (g_queue.empty()) return;
        void* p = g_queue.front();
        g_queue.pop_front();
        g_changed.notify_all();
        lock.unlock();
        if (which % 2 == 1 && n % 3 == 0) {
            if (void* bigger = realloc(p, 3000 + static_cast<size_t>(n % 5000))) p = bigger;
        }
        free(p);
    }
}

long number(const char* text) { return std::strtol(text, nullptr, 10); }

}  // namespace

int main(int argc, char** argv) {
    long producers = 2, consumers = 2, items = 200000, keep = 0, respawn = 20000, seconds = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char* v = argv[i + 1];
        if (!strcmp(argv[i], "--producers")) producers = number(v);
        else if (!strcmp(argv[i], "--consumers")) consumers = number(v);
        else if (!strcmp(argv[i], "--items")) items = number(v);
        else if (!strcmp(argv[i], "--keep")) keep = number(v);
        else if (!strcmp(argv[i], "--respawn")) respawn = number(v);
        else if (!strcmp(argv[i], "--seconds")) seconds = number(v);
        else {
            fprintf(stderr, "handoff: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (producers < 1 || consumers < 1 || respawn < 1) {
        fprintf(stderr, "handoff: needs a producer, a consumer and --respawn >= 1\n");
        return 2;
    }
    const bool timed = seconds > 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    if (timed) {
        printf("running pid %d\n", static_cast<int>(getpid()));
        fflush(stdout);
    }

    std::vector<std::thread> eaters;
    for (long c = 0; c < consumers; ++c) eaters.emplace_back(consume, static_cast<int>(c));
    // Each producer slot runs a chain of threads, each making `respawn` blocks then ending.
    std::vector<std::thread> makers;
    const long per_slot = items / producers;
    for (long p = 0; p < producers; ++p)
        makers.emplace_back([per_slot, respawn, until, timed] {
            for (long made = 0; timed ? std::chrono::steady_clock::now() < until : made < per_slot; made += respawn) {
                long batch = timed ? respawn : std::min(respawn, per_slot - made);
                std::thread worker(produce, batch, until, false);
                worker.join();
            }
        });
    for (std::thread& t : makers) t.join();
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_done = true;
    }
    g_changed.notify_all();
    for (std::thread& t : eaters) t.join();

    for (long i = 0; i < keep; ++i) g_kept.push_back(malloc(100));
    printf("produced %ld, held %zu\n", g_produced.load(), g_kept.size());
    return 0;
}
