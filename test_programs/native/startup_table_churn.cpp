// Loads a large table once at start-up, then runs steady allocation churn in several threads.
// The table is big but never grows after loading; the churn is transient (each thread keeps a
// ring of at most RING live blocks). Nothing here grows with the amount of work.
//
// usage: startup_table_churn [TABLE_MB=50] [THREADS=4] [ROUNDS=150] [OPS=1000] [SLEEP_US=10000]
//   the table is TABLE_MB MiB of 1024-byte rows allocated in load_table; each thread runs
//   ROUNDS rounds of OPS malloc/free pairs and sleeps SLEEP_US after each: about 2 s by default.
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kRowSize = 1024;
constexpr size_t kRing = 64;

struct Table {
    char** rows;
    size_t count;
};

__attribute__((noinline)) char* load_row(size_t i) {
    char* row = static_cast<char*>(malloc(kRowSize));  // LINE-MARK: load_row
    memset(row, static_cast<int>(i & 0xff), kRowSize);
    return row;
}

__attribute__((noinline)) Table load_table(size_t megabytes) {
    Table table;
    table.count = megabytes * (1024 * 1024 / kRowSize);
    table.rows = static_cast<char**>(malloc(table.count * sizeof(char*)));
    for (size_t i = 0; i < table.count; ++i) table.rows[i] = load_row(i);
    return table;
}

__attribute__((noinline)) void* churn_alloc(size_t size) { return malloc(size); }

__attribute__((noinline)) void churn(unsigned seed, long rounds, long ops, long sleep_us, const Table* table) {
    void* ring[kRing] = {};
    unsigned long state = seed * 2654435761UL + 1;
    unsigned long sum = 0;
    for (long r = 0; r < rounds; ++r) {
        for (long op = 0; op < ops; ++op) {
            state = state * 6364136223846793005UL + 1442695040888963407UL;
            size_t size = 16 + (state >> 33) % 4080;
            size_t slot = (state >> 20) % kRing;
            free(ring[slot]);
            ring[slot] = churn_alloc(size);
            static_cast<char*>(ring[slot])[0] = table->rows[(state >> 40) % table->count][0];
            sum += static_cast<unsigned char*>(ring[slot])[0];
        }
        if (sleep_us > 0) usleep(static_cast<useconds_t>(sleep_us));
    }
    for (void* p : ring) free(p);
    if (sum == 1) puts("");  // keep the work observable
}

}  // namespace

int main(int argc, char** argv) {
    long table_mb = argc > 1 ? atol(argv[1]) : 50;
    long threads = argc > 2 ? atol(argv[2]) : 4;
    long rounds = argc > 3 ? atol(argv[3]) : 150;
    long ops = argc > 4 ? atol(argv[4]) : 1000;
    long sleep_us = argc > 5 ? atol(argv[5]) : 10000;

    Table table = load_table(static_cast<size_t>(table_mb));
    std::vector<std::thread> workers;
    for (long t = 0; t < threads; ++t) {
        workers.emplace_back(churn, static_cast<unsigned>(t + 1), rounds, ops, sleep_us, &table);
    }
    for (auto& w : workers) w.join();
    printf("startup_table_churn: table of %zu rows, %ld threads x %ld rounds x %ld ops\n", table.count,
           threads, rounds, ops);
    return 0;
}
