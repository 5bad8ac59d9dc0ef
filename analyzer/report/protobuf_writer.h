// A minimal writer of the protocol buffers wire format (varints, length-delimited fields,
// packed repeated varints): enough to emit a pprof Profile (profile.proto) without code
// generation. Fields are written in the order the caller gives; a reader accepts any order.
// Why our own and not libprotobuf: see README, "Exporting to pprof".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace growtrace::proto {

class Writer {
public:
    // uint64/uint32/bool fields (wire type 0).
    void uint64(uint32_t field, uint64_t value);
    // int64 fields are plain two's-complement varints (not zigzag): -1 takes ten bytes.
    void int64(uint32_t field, int64_t value) { uint64(field, static_cast<uint64_t>(value)); }
    // string and bytes fields (wire type 2).
    void bytes(uint32_t field, std::string_view value);
    // A nested message (wire type 2).
    void message(uint32_t field, const Writer& nested) { bytes(field, nested.data()); }
    // A packed repeated uint64 or int64 field; nothing is written for an empty list.
    void packed(uint32_t field, const std::vector<uint64_t>& values);
    void packed(uint32_t field, const std::vector<int64_t>& values);

    const std::string& data() const { return data_; }
    void clear() { data_.clear(); }

private:
    void tag(uint32_t field, uint32_t wire_type);
    void varint(uint64_t value);
    std::string data_;
};

// Appends the varint encoding of value (1 to 10 bytes) to out.
void append_varint(std::string& out, uint64_t value);

}  // namespace growtrace::proto
