// The stack tree: every distinct (parent node, instruction pointer) pair gets a small integer
// id, so an allocation stores one id instead of its whole stack and each frame is written to
// the trace once. Shared by all threads without a lock: an open-addressing table whose slots
// are claimed with a compare-and-swap; lookups of existing nodes only read.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace growtrace::preload {

class StackTree {
public:
    // Where a pair's slot is. Hashed suits any keys; ByParent (see home_slot) suits a real
    // tree, whose parents are its own dense ids, and must not be used for other keys.
    enum class Layout { Hashed, ByParent };

    struct Options {
        Layout layout = Layout::Hashed;
        // 2 MiB pages: lookups of a large tree then miss the TLB far less, but a small tree's
        // scattered slots each pull in a whole 2 MiB.
        bool huge_pages = false;
        // Map every page at once instead of faulting each in on first use (twice: a read
        // maps the zero page, the claiming write copies it). For tables that end up touched
        // all over anyway; page faults are costly, most of all in virtual machines.
        bool populate = false;
    };

    // Reserves address space for 2^capacity_log2 nodes; pages are touched only when used,
    // unless options.populate.
    bool init(unsigned capacity_log2, Options options);
    bool init(unsigned capacity_log2);
    // Forgets every node (used in a forked child, whose trace starts a new tree).
    void reset();
    // Unmaps the table (before the library is unloaded); init() maps it again.
    void release();

    // Returns the id of (parent, ip), creating it if needed; `created` tells the caller to
    // write the node to the trace. Returns 0 when the table is full (the stack is cut there).
    uint32_t intern(uint32_t parent, uint64_t ip, bool& created);

    uint32_t node_count() const { return next_id_.load(std::memory_order_relaxed) - 1; }
    // Changes at every reset: memos of lookups made before are stale.
    uint32_t epoch() const { return epoch_.load(std::memory_order_relaxed); }

    static size_t hash(uint32_t parent, uint64_t ip) {
        uint64_t h = ip * 0x9E3779B97F4A7C15ull ^ (uint64_t{parent} * 0xC2B2AE3D27D4EB4Full);
        return static_cast<size_t>(h ^ (h >> 29));
    }

private:
    // Where (parent, ip) is looked for first. Lookups follow paths parent to child, and a path
    // seen for the first time gets consecutive ids, so slots are placed by parent: 64
    // consecutive parents share one 4 KiB block of 256 slots (4 each, picked by the ip), and
    // blocks are scattered over the table. A path's nodes then share a page and often a cache
    // line, where a plain hash would cost a cache and TLB miss per node.
    size_t home_slot(uint32_t parent, uint64_t ip) const {
        if (options_.layout == Layout::Hashed) return hash(parent, ip) & mask_;
        auto block = static_cast<size_t>((uint64_t{parent >> 6} * 0x9E3779B97F4A7C15ull) >> 32);
        size_t within = (size_t{parent & 63} << 2) | static_cast<size_t>((ip * 0xC2B2AE3D27D4EB4Full) >> 62);
        return ((block << 8) | within) & mask_;
    }

    struct Slot {
        std::atomic<uint32_t> id;  // 0 = empty, kClaimed = being filled
        uint32_t parent;
        uint64_t ip;
    };
    static constexpr uint32_t kClaimed = ~uint32_t{0};
    static constexpr size_t kNearProbes = 16;  // slots tried near the parent (4 cache lines)

    Slot* slots_ = nullptr;
    size_t mask_ = 0;
    size_t bytes_ = 0;
    Options options_;
    uint32_t max_nodes_ = 0;
    std::atomic<uint32_t> next_id_{1};
    std::atomic<uint32_t> epoch_{1};
};

// One thread's memo of its recent lookups in a StackTree, direct-mapped. The tree itself is
// large and shared, so nearly every lookup there is a cache miss; a thread keeps coming back to
// the same few thousand (parent, ip) pairs (loops, one call site allocating repeatedly), which
// fit here, in 16 bytes per entry of its own.
template <size_t Entries>
class StackTreeMemo {
    static_assert((Entries & (Entries - 1)) == 0, "a power of two");

public:
    uint32_t intern(StackTree& tree, uint32_t parent, uint64_t ip, bool& created) {
        if (uint32_t id = find(tree.epoch(), parent, ip)) {
            created = false;
            return id;
        }
        uint32_t id = tree.intern(parent, ip, created);
        if (id) remember(parent, ip, id);
        return id;
    }

    // The remembered id of (parent, ip), 0 if none; everything remembered under another epoch
    // of the tree is forgotten.
    uint32_t find(uint32_t epoch, uint32_t parent, uint64_t ip) {
        if (epoch_ != epoch) {
            memset(entries_, 0, sizeof entries_);
            epoch_ = epoch;
        }
        const Entry& e = entries_[StackTree::hash(parent, ip) & (Entries - 1)];
        return e.id && e.ip == ip && e.parent == parent ? e.id : 0;
    }
    void remember(uint32_t parent, uint64_t ip, uint32_t id) {
        entries_[StackTree::hash(parent, ip) & (Entries - 1)] = {ip, parent, id};
    }
    void forget() { epoch_ = 0; }

private:
    struct Entry {
        uint64_t ip;
        uint32_t parent;
        uint32_t id;  // 0 = empty
    };
    Entry entries_[Entries] = {};
    uint32_t epoch_ = 0;
};

}  // namespace growtrace::preload
