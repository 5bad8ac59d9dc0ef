// A parser's dictionary that grows for as long as the program works and is freed by a clean-up
// call just before main returns, as tidy C programs do: every word read is interned for good
// (one block per entry, allocated at the LINE-MARK in intern_word), and dictionary_free() releases
// them all at the end. The growth before the clean-up is what matters.
//
// usage: teardown_table [ENTRIES=300000] [ENTRY_BYTES=32] [SECONDS=3]
//   ENTRIES entries of ENTRY_BYTES bytes each, inserted evenly over about SECONDS seconds.
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Entry {
    Entry* next;
    unsigned long key;
    char* text;
};

constexpr size_t kBuckets = 1 << 16;
Entry** g_buckets = nullptr;
size_t g_entries = 0;
size_t g_entry_bytes = 32;

__attribute__((noinline)) char* intern_word(unsigned long key) {
    return static_cast<char*>(memset(malloc(g_entry_bytes), static_cast<int>(key & 0x7f), g_entry_bytes));  // LINE-MARK: intern_word
}

__attribute__((noinline)) void dictionary_add(unsigned long key) {
    auto* e = static_cast<Entry*>(malloc(sizeof(Entry)));
    e->key = key;
    e->text = intern_word(key);
    Entry*& head = g_buckets[key % kBuckets];
    e->next = head;
    head = e;
    ++g_entries;
}

// The clean-up call: every entry and the bucket array, just before main returns.
__attribute__((noinline)) void dictionary_free() {
    for (size_t b = 0; b < kBuckets; ++b) {
        for (Entry* e = g_buckets[b]; e;) {
            Entry* next = e->next;
            free(e->text);
            free(e);
            e = next;
        }
    }
    free(g_buckets);
    g_buckets = nullptr;
}

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
    const long entries = argc > 1 ? atol(argv[1]) : 300000;
    g_entry_bytes = argc > 2 ? static_cast<size_t>(atol(argv[2])) : 32;
    const double seconds = argc > 3 ? atof(argv[3]) : 3.0;
    g_buckets = static_cast<Entry**>(calloc(kBuckets, sizeof(Entry*)));
    // Paced by the clock, in 100 steps, so that the growth is even over the run however fast
    // the machine is.
    const double start = now_s();
    const long steps = 100;
    for (long step = 0; step < steps; ++step) {
        for (long i = entries * step / steps; i < entries * (step + 1) / steps; ++i)
            dictionary_add(static_cast<unsigned long>(i) * 2654435761u);
        const double due = start + seconds * static_cast<double>(step + 1) / steps;
        const double left = due - now_s();
        if (left > 0) usleep(static_cast<useconds_t>(left * 1e6));
    }
    printf("teardown_table: %zu entries of %zu bytes\n", g_entries, g_entry_bytes);
    fflush(stdout);
    dictionary_free();
    return 0;
}
