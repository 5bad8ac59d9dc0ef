// The analyzer's maps keyed on 64-bit numbers (addresses, stack ids) that it looks up once
// or more per traced event. std::unordered_map allocates a node per entry, so each lookup is
// two cache misses (bucket, node); tsl::robin_map (robin-map-dev, header only) keeps the
// entries inline in one array.
//
// Its differences from std::unordered_map that callers must mind: an iterator's value is
// changed through it.value(), not it->second; and an insertion may move every entry, so no
// reference into the map is kept across an insertion.
#pragma once

#include <cstddef>
#include <cstdint>

#include <tsl/robin_map.h>

namespace growtrace {

// Addresses are 16-byte aligned and stack ids cluster; robin_map takes the low bits of the hash
// as the bucket, so the key's bits are mixed first (the finalizer of MurmurHash3).
struct MixedU64Hash {
    size_t operator()(uint64_t k) const noexcept {
        k ^= k >> 33;
        k *= 0xff51afd7ed558ccdULL;
        k ^= k >> 33;
        return static_cast<size_t>(k);
    }
};

template <class Value>
using U64Map = tsl::robin_map<uint64_t, Value, MixedU64Hash>;

}  // namespace growtrace
