#include "preload/stack_tree.h"

#include <sched.h>
#include <sys/mman.h>

#include <cstring>

namespace growtrace::preload {
bool StackTree::init(unsigned capacity_log2, Layout layout, bool huge_pages) {
    layout_ = layout;
    size_t slots = size_t{1} << capacity_log2;
    bytes_ = slots * sizeof(Slot);
    void* mem = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return false;
    slots_ = static_cast<Slot*>(mem);
    huge_pages_ = huge_pages;
    if (huge_pages_) madvise(mem, bytes_, MADV_HUGEPAGE);  // advice only: fine if refused
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
    if (huge_pages_) madvise(slots_, bytes_, MADV_HUGEPAGE);
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
        if (probes == kNearProbes && layout_ == Layout::ByParent) i = hash(parent, ip);
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
