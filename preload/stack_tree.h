// The stack tree: every distinct (parent node, instruction pointer) pair gets a small integer
// id, so an allocation stores one id instead of its whole stack and each frame is written to
// the trace once. Shared by all threads without a lock: an open-addressing table whose slots
// are claimed with a compare-and-swap; lookups of existing nodes only read.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace growtrace::preload {

class StackTree {
public:
    // Reserves address space for 2^capacity_log2 nodes; pages are touched only when used.
    bool init(unsigned capacity_log2);
    // Forgets every node (used in a forked child, whose trace starts a new tree).
    void reset();

    // Returns the id of (parent, ip), creating it if needed; `created` tells the caller to
    // write the node to the trace. Returns 0 when the table is full (the stack is cut there).
    uint32_t intern(uint32_t parent, uint64_t ip, bool& created);

    uint32_t node_count() const { return next_id_.load(std::memory_order_relaxed) - 1; }
    // Changes at every reset: memos of lookups made before are stale.
    uint32_t epoch() const { return epoch_.load(std::memory_order_relaxed); }

private:
    struct Slot {
        std::atomic<uint32_t> id;  // 0 = empty, kClaimed = being filled
        uint32_t parent;
        uint64_t ip;
    };
    static constexpr uint32_t kClaimed = ~uint32_t{0};

    Slot* slots_ = nullptr;
    size_t mask_ = 0;
    size_t bytes_ = 0;
    uint32_t max_nodes_ = 0;
    std::atomic<uint32_t> next_id_{1};
    std::atomic<uint32_t> epoch_{1};
};

// One thread's memo of its recent lookups in a StackTree, direct-mapped. The tree itself is
// large and shared, so nearly every lookup there is a cache miss; a thread keeps coming back to
// the same few thousand (parent, ip) pairs (loops, one call site allocating repeatedly), which
// fit here, in 16 KiB of its own.
class StackTreeMemo {
public:
    uint32_t intern(StackTree& tree, uint32_t parent, uint64_t ip, bool& created);
    void forget() { epoch_ = 0; }

private:
    struct Entry {
        uint64_t ip;
        uint32_t parent;
        uint32_t id;  // 0 = empty
    };
    static constexpr size_t kEntries = 1024;
    Entry entries_[kEntries] = {};
    uint32_t epoch_ = 0;
};

}  // namespace growtrace::preload
