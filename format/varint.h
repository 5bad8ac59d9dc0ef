// LEB128 varints for the trace format. The encoder writes into a caller-provided buffer and
// never allocates: the preload library calls it from inside malloc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace growtrace::format {

inline constexpr size_t kMaxVarintBytes = 10;

constexpr uint64_t zigzag_encode(int64_t v) {
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
constexpr int64_t zigzag_decode(uint64_t v) {
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

// Writes v at p, returns the position after it. p must have kMaxVarintBytes free.
inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = static_cast<uint8_t>(v) | 0x80;
        v >>= 7;
    }
    *p++ = static_cast<uint8_t>(v);
    return p;
}

constexpr size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}

// Bounds-checked decoding cursor over untrusted bytes. Every getter returns false instead of
// reading past the end or accepting an over-long varint.
class Cursor {
public:
    Cursor(const uint8_t* begin, const uint8_t* end) : p_(begin), begin_(begin), end_(end) {}

    bool varint(uint64_t& out) {
        uint64_t result = 0;
        for (unsigned shift = 0; shift < 64; shift += 7) {
            if (p_ == end_) return false;
            uint8_t byte = *p_++;
            if (shift == 63 && byte > 1) return false;
            result |= uint64_t{byte & 0x7fu} << shift;
            if (!(byte & 0x80)) {
                out = result;
                return true;
            }
        }
        return false;
    }
    bool svarint(int64_t& out) {
        uint64_t v;
        if (!varint(v)) return false;
        out = zigzag_decode(v);
        return true;
    }
    bool byte(uint8_t& out) {
        if (p_ == end_) return false;
        out = *p_++;
        return true;
    }
    // A string is a varint length followed by that many bytes; the view points into the buffer.
    bool bytes(const uint8_t*& data, size_t& size) {
        uint64_t n;
        if (!varint(n) || n > remaining()) return false;
        data = p_;
        size = static_cast<size_t>(n);
        p_ += n;
        return true;
    }
    bool skip(size_t n) {
        if (n > remaining()) return false;
        p_ += n;
        return true;
    }
    size_t remaining() const { return static_cast<size_t>(end_ - p_); }
    size_t offset() const { return static_cast<size_t>(p_ - begin_); }
    const uint8_t* position() const { return p_; }
    bool at_end() const { return p_ == end_; }

private:
    const uint8_t* p_;
    const uint8_t* begin_;
    const uint8_t* end_;
};

}  // namespace growtrace::format
