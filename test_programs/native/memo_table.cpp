// An unbounded per-request memo table: every request computes a result for a new key and
// keeps it forever. After N requests exactly N blocks of 1000 bytes, each allocated by the
// malloc at the LINE-MARK below in remember_result, are retained. The table's own nodes and
// bucket arrays are allocated on other stacks (inside std::unordered_map), and every request
// also makes short-lived allocations in handle_request that are freed before it returns.
//
// usage: memo_table [REQUESTS=1000] [SLEEP_US=2000] [--release-at-exit] [--static-owner] [--exit]
//                   [--block-size BYTES=1000]
//   SLEEP_US is slept after each request, so the default run lasts about 2 s.
//   --block-size makes each kept block bigger (sampled-mode tests need more bytes to sample).
//   --release-at-exit frees every block before main returns.
//   --static-owner makes the table a static object whose destructor frees every block once
//   main has returned (a C++ cache emptied by the runtime at shutdown, which is not the
//   program's steady state); --exit leaves through exit(0) instead of returning from main.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

size_t kResultSize = 1000;  // --block-size

// Never destroyed, like most process-wide caches (unless --static-owner).
std::unordered_map<unsigned long, char*>* g_memo = nullptr;

// --static-owner: the table belongs to a static object, destroyed at exit.
struct StaticOwner {
    std::unordered_map<unsigned long, char*> table;
    ~StaticOwner() {
        for (auto& [key, block] : table) free(block);
    }
};
StaticOwner g_owner;

__attribute__((noinline)) char* remember_result(unsigned long key) {
    // One line, so that the instruction after the call to malloc is on the marked line too.
    return static_cast<char*>(memset(malloc(kResultSize), static_cast<int>(key & 0xff), kResultSize));  // LINE-MARK: remember_result
}

// Transient work of one request: allocated and freed before the request ends.
__attribute__((noinline)) unsigned long scratch_work(unsigned long key) {
    std::vector<unsigned long> scratch(64 + key % 64, key);
    std::string text = "request-" + std::to_string(key) + "-with-a-name-longer-than-sso";
    unsigned long sum = text.size();
    for (unsigned long v : scratch) sum += v;
    return sum;
}

__attribute__((noinline)) unsigned long handle_request(unsigned long key) {
    auto it = g_memo->find(key);
    if (it == g_memo->end()) it = g_memo->emplace(key, remember_result(key)).first;
    return scratch_work(key) + static_cast<unsigned char>(it->second[0]);
}

}  // namespace

int main(int argc, char** argv) {
    long requests = 1000;
    long sleep_us = 2000;
    bool release_at_exit = false, static_owner = false, call_exit = false;
    int positional = 0;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--release-at-exit") == 0) {
            release_at_exit = true;
        } else if (strcmp(argv[i], "--static-owner") == 0) {
            static_owner = true;
        } else if (strcmp(argv[i], "--exit") == 0) {
            call_exit = true;
        } else if (strcmp(argv[i], "--block-size") == 0 && i + 1 < argc) {
            kResultSize = static_cast<size_t>(atol(argv[++i]));
        } else if (positional == 0) {
            requests = atol(argv[i]);
            ++positional;
        } else {
            sleep_us = atol(argv[i]);
            ++positional;
        }
    }
    g_memo = static_owner ? &g_owner.table : new std::unordered_map<unsigned long, char*>();
    unsigned long checksum = 0;
    for (long i = 0; i < requests; ++i) {
        checksum += handle_request(static_cast<unsigned long>(i) * 7919 + 1);
        if (sleep_us > 0) usleep(static_cast<useconds_t>(sleep_us));
    }
    printf("memo_table: %zu entries of %zu bytes, checksum %lu\n", g_memo->size(), kResultSize, checksum);
    if (release_at_exit) {
        for (auto& [key, block] : *g_memo) free(block);
        if (!static_owner) delete g_memo;
        else g_owner.table.clear();
    }
    fflush(stdout);
    if (call_exit) exit(0);
    return 0;
}
