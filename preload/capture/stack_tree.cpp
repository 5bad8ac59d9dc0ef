#include "preload/capture/stack_tree.h"

#include <sched.h>
#include <sys/mman.h>

#include <cstring>

namespace growtrace::preload {
namespace {
// Fresh zero pages at `at` (or anywhere if null), advised and populated as asked.
void* map_table(void* at, size_t bytes, const StackTree::Options& options) {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (at ? MAP_FIXED : 0);
    void* mem = mmap(at, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (mem == MAP_FAILED) return nullptr;
    if (options.huge_pages) madvise(mem, bytes, MADV_HUGEPAGE);  // advice only: fine if refused
    if (options.populate) madvise(mem, bytes, MADV_POPULATE_WRITE);  // Linux 5.14+; else faults
    return mem;
}
}  // namespace

bool StackTree::init(unsigned capacity_log2, Options options) {
    options_ = options;
    size_t slots = size_t{1} << capacity_log2;
    bytes_ = slots * sizeof(Slot);
    void* mem = map_table(nullptr, bytes_, options_);
    if (!mem) return false;
    slots_ = static_cast<Slot*>(mem);
    mask_ = slots - 1;
    // Keep the load factor below 3/4 so probe sequences stay short.
    max_nodes_ = static_cast<uint32_t>(slots / 4 * 3);
    next_id_.store(1, std::memory_order_relaxed);
    return true;
}

bool StackTree::init(unsigned capacity_log2) { return init(capacity_log2, Options{}); }

void StackTree::release() {
    if (slots_) munmap(slots_, bytes_);
    slots_ = nullptr;
}

void StackTree::reset() {
    if (!slots_) return;
    // Fresh zero pages instead of a memset: cheap even for a large, sparsely used table.
    map_table(slots_, bytes_, options_);
    next_id_.store(1, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_relaxed);
}

uint32_t StackTree::intern(uint32_t parent, uint64_t ip, bool& created) {
    created = false;
    if (!slots_) return 0;
    for (size_t i = home_slot(parent, ip), probes = 0; probes <= mask_; ++i, ++probes) {
        // A parent with many children (a module body allocating on every line, code made at
        // run time) would grow one long run of slots near it that its neighbours' lookups also
        // have to cross: past a few probes, the search goes on at a hashed place instead.
        if (probes == kNearProbes && options_.layout == Layout::ByParent) i = hash(parent, ip);
        Slot& slot = slots_[i & mask_];
        uint32_t id = slot.id.load(std::memory_order_acquire);
        if (id == 0) {
            if (next_id_.load(std::memory_order_relaxed) >= max_nodes_) return 0;
            if (slot.id.compare_exchange_strong(id, kClaimed, std::memory_order_acquire)) {
                slot.parent = parent;
                slot.ip = ip;
                uint32_t new_id = next_id_.fetch_add(1, std::memory_order_relaxed);
                slot.id.store(new_id, std::memory_order_release);
                created = true;
                return new_id;
            }
            // Lost the race for this slot; `id` now holds what the winner stored.
        }
        while (id == kClaimed) {  // another thread is filling this slot: a few instructions
            sched_yield();
            id = slot.id.load(std::memory_order_acquire);
        }
        if (slot.parent == parent && slot.ip == ip) return id;
    }
    return 0;
}

}  // namespace growtrace::preload
