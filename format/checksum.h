// CRC-32C (Castagnoli polynomial, reflected: 0x82F63B78), the checksum of trace blocks from
// format version 3 (docs/trace-format.md, "Block"). Table-driven, eight bytes per step; the
// tables are computed at compile time. Header-only: the writer (preload library) and the
// reader (analyzer) share it. The writer thread computes it, never an allocation hook.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace growtrace::format {

namespace checksum_detail {

struct Crc32cTables {
    uint32_t t[8][256];
};

constexpr Crc32cTables make_tables() {
    Crc32cTables tables{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        tables.t[0][i] = c;
    }
    // t[k][i]: the CRC of byte i followed by k zero bytes, so eight bytes fold in one step.
    for (int k = 1; k < 8; ++k)
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t prev = tables.t[k - 1][i];
            tables.t[k][i] = (prev >> 8) ^ tables.t[0][prev & 0xff];
        }
    return tables;
}

inline constexpr Crc32cTables kTables = make_tables();

}  // namespace checksum_detail

// Continues a CRC-32C over more bytes: crc32c_update(crc32c(a), b) == crc32c(a followed by b).
inline uint32_t crc32c_update(uint32_t crc, const void* data, size_t size) {
    const auto& t = checksum_detail::kTables.t;
    auto* p = static_cast<const uint8_t*>(data);
    uint32_t c = ~crc;
    while (size >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);  // little endian: the first byte is the lowest
        v ^= c;
        c = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
            t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
        p += 8;
        size -= 8;
    }
    while (size--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
    return ~c;
}

inline uint32_t crc32c(const void* data, size_t size) { return crc32c_update(0, data, size); }

}  // namespace growtrace::format
