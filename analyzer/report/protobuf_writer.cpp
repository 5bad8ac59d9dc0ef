#include "analyzer/report/protobuf_writer.h"

namespace growtrace::proto {

namespace {
constexpr uint32_t kVarint = 0;
constexpr uint32_t kLengthDelimited = 2;
}  // namespace

void append_varint(std::string& out, uint64_t value) {
    while (value >= 0x80) {
        out.push_back(static_cast<char>((value & 0x7f) | 0x80));
        value >>= 7;
    }
    out.push_back(static_cast<char>(value));
}

void Writer::varint(uint64_t value) { append_varint(data_, value); }

void Writer::tag(uint32_t field, uint32_t wire_type) { varint((uint64_t{field} << 3) | wire_type); }

void Writer::uint64(uint32_t field, uint64_t value) {
    tag(field, kVarint);
    varint(value);
}

void Writer::bytes(uint32_t field, std::string_view value) {
    tag(field, kLengthDelimited);
    varint(value.size());
    data_.append(value);
}

void Writer::packed(uint32_t field, const std::vector<uint64_t>& values) {
    if (values.empty()) return;
    std::string body;
    for (uint64_t v : values) append_varint(body, v);
    bytes(field, body);
}

void Writer::packed(uint32_t field, const std::vector<int64_t>& values) {
    if (values.empty()) return;
    std::string body;
    for (int64_t v : values) append_varint(body, static_cast<uint64_t>(v));
    bytes(field, body);
}

}  // namespace growtrace::proto
