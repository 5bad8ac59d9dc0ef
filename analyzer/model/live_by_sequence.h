// The live allocations of a version-2 trace, by allocation sequence number.
//
// Sequence numbers come in file order (the n-th AllocCompact record is allocation n) and most
// allocations die young: of an openai reproduction's 7.6 million allocations, 7.2 million are
// freed, most within a few thousand allocations. A hash map over all live allocations made
// every insertion and every free a cache miss (a 432,000-entry table), which was most of the
// analysis's time. So the young live in a ring indexed by sequence number, written in order
// and read while still in the cache; an allocation that outlives the ring moves to a hash map.
// Exact: every sequence number is in exactly one of the two, by its age.
#pragma once

#include <cstdint>
#include <vector>

#include "analyzer/model/flat_map.h"

namespace growtrace {

template <class Value>
class LiveBySequence {
public:
    // The ring holds the last 2^young_bits sequence numbers (16: 65,536, 2 MB for 24-byte values).
    explicit LiveBySequence(unsigned young_bits = 16) : young_(size_t{1} << young_bits) {}

    void insert(uint64_t seq, const Value& value) {
        if (seq > newest_) advance_to(seq);
        if (is_young(seq)) {
            young_[index(seq)] = Young{value, true};
        } else {
            old_.insert_or_assign(seq, value);
        }
    }

    // The live value of `seq`, or nullptr.
    const Value* find(uint64_t seq) const {
        if (is_young(seq)) {
            const Young& y = young_[index(seq)];
            return y.live ? &y.value : nullptr;
        }
        auto it = old_.find(seq);
        return it == old_.end() ? nullptr : &it->second;
    }

    // Removes `seq` and gives its value; false if it is not live.
    bool take(uint64_t seq, Value& out) {
        if (is_young(seq)) {
            Young& y = young_[index(seq)];
            if (!y.live) return false;
            out = y.value;
            y.live = false;
            return true;
        }
        auto it = old_.find(seq);
        if (it == old_.end()) return false;
        out = it->second;
        old_.erase(it);
        return true;
    }

    template <class F>
    void for_each(F&& f) const {
        for (const auto& [seq, value] : old_) f(seq, value);
        if (newest_ == 0) return;
        const uint64_t first = newest_ >= young_.size() ? newest_ - young_.size() + 1 : 1;
        for (uint64_t seq = first; seq <= newest_; ++seq) {
            const Young& y = young_[index(seq)];
            if (y.live) f(seq, y.value);
        }
    }

    void clear() {
        old_ = {};
        for (Young& y : young_) y.live = false;
        newest_ = 0;
    }

private:
    struct Young {
        Value value{};
        bool live = false;
    };

    size_t index(uint64_t seq) const { return static_cast<size_t>(seq & (young_.size() - 1)); }
    bool is_young(uint64_t seq) const { return seq != 0 && seq <= newest_ && newest_ - seq < young_.size(); }

    // The ring's window moves up to `seq`: the allocations it leaves behind are now too old
    // for the ring, and those still live move to the map.
    void advance_to(uint64_t seq) {
        const uint64_t n = young_.size();
        const uint64_t oldest_kept = seq >= n ? seq - n + 1 : 1;
        const uint64_t from = newest_ >= n ? newest_ - n + 1 : 1;
        for (uint64_t o = from; o <= newest_ && o < oldest_kept; ++o) {
            Young& y = young_[index(o)];
            if (!y.live) continue;
            old_.insert_or_assign(o, y.value);
            y.live = false;
        }
        newest_ = seq;
    }

    std::vector<Young> young_;
    uint64_t newest_ = 0;  // the highest sequence number seen (sequence numbers start at 1)
    U64Map<Value> old_;
};

}  // namespace growtrace
