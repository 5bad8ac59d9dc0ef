// A true LRU cache of fixed capacity fed distinct keys for the whole run: every insertion
// after the first CAPACITY evicts (and frees) the least recently used entry. Retained memory
// is large but bounded: CAPACITY blocks of VALUE_SIZE (1000) bytes from lru_store at any time.
//
// usage: bounded_lru [KEYS=20000] [CAPACITY=500] [SLEEP_US=1000] [BATCH=10] [VALUE_SIZE=1000]
//   sleeps SLEEP_US after every BATCH keys: about 2 s by default.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <unordered_map>

namespace {

size_t kValueSize = 1000;  // VALUE_SIZE

class LruCache {
public:
    explicit LruCache(size_t capacity) : capacity_(capacity) { index_.reserve(capacity * 2); }

    void put(unsigned long key) {
        auto found = index_.find(key);
        if (found != index_.end()) {
            order_.splice(order_.begin(), order_, found->second);
            return;
        }
        if (index_.size() == capacity_) evict_oldest();
        order_.push_front(Entry{key, lru_store(key)});
        index_.emplace(key, order_.begin());
    }

    size_t size() const { return index_.size(); }

private:
    struct Entry {
        unsigned long key;
        char* value;
    };

    __attribute__((noinline)) static char* lru_store(unsigned long key) {
        // One line, so that the instruction after the call to malloc is on the marked line too.
        return static_cast<char*>(memset(malloc(kValueSize), static_cast<int>(key & 0xff), kValueSize));  // LINE-MARK: lru_store
    }

    void evict_oldest() {
        Entry& oldest = order_.back();
        free(oldest.value);
        index_.erase(oldest.key);
        order_.pop_back();
    }

    size_t capacity_;
    std::list<Entry> order_;
    std::unordered_map<unsigned long, std::list<Entry>::iterator> index_;
};

}  // namespace

int main(int argc, char** argv) {
    long keys = argc > 1 ? atol(argv[1]) : 20000;
    long capacity = argc > 2 ? atol(argv[2]) : 500;
    long sleep_us = argc > 3 ? atol(argv[3]) : 1000;
    long batch = argc > 4 ? atol(argv[4]) : 10;
    if (argc > 5) kValueSize = static_cast<size_t>(atol(argv[5]));
    if (batch < 1) batch = 1;
    auto* cache = new LruCache(static_cast<size_t>(capacity));
    for (long i = 0; i < keys; ++i) {
        cache->put(static_cast<unsigned long>(i) * 2654435761UL);
        if (sleep_us > 0 && (i + 1) % batch == 0) usleep(static_cast<useconds_t>(sleep_us));
    }
    printf("bounded_lru: %ld keys through a cache of %zu entries\n", keys, cache->size());
    return 0;
}
