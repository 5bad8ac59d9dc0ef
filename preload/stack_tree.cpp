#include "preload/stack_tree.h"

#include <sched.h>
#include <sys/mman.h>

#include <cstring>

namespace growtrace::preload {
namespace {
inline size_t hash_node(uint32_t parent, uint64_t ip) {
    uint64_t h = ip * 0x9E3779B97F4A7C15ull ^ (uint64_t{parent} * 0xC2B2AE3D27D4EB4Full);
    return static_cast<size_t>(h ^ (h >> 29));
}
}  // namespace

bool StackTree::init(unsigned capacity_log2) {
    size_t slots = size_t{1} << capacity_log2;
    bytes_ = slots * sizeof(Slot);
    void* mem = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return false;
    slots_ = static_cast<Slot*>(mem);
    mask_ = slots - 1;
    // Keep the load factor below 3/4 so probe sequences stay short.
    max_nodes_ = static_cast<uint32_t>(slots / 4 * 3);
    next_id_.store(1, std::memory_order_relaxed);
    return true;
}

void StackTree::reset() {
    if (!slots_) return;
    // Fresh zero pages instead of a memset: cheap even for a large, sparsely used table.
    mmap(slots_, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
         -1, 0);
    next_id_.store(1, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_relaxed);
}

uint32_t StackTreeMemo::intern(StackTree& tree, uint32_t parent, uint64_t ip, bool& created) {
    if (epoch_ != tree.epoch()) {
        memset(entries_, 0, sizeof entries_);
        epoch_ = tree.epoch();
    }
    Entry& e = entries_[hash_node(parent, ip) & (kEntries - 1)];
    if (e.id && e.ip == ip && e.parent == parent) {
        created = false;
        return e.id;
    }
    uint32_t id = tree.intern(parent, ip, created);
    if (id) e = {ip, parent, id};
    return id;
}

uint32_t StackTree::intern(uint32_t parent, uint64_t ip, bool& created) {
    created = false;
    if (!slots_) return 0;
    for (size_t i = hash_node(parent, ip), probes = 0; probes <= mask_; ++i, ++probes) {
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
