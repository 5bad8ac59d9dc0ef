// Encodes one record into a small fixed buffer, then lets the caller copy it out. No
// allocation, no exceptions: used inside the allocator hooks and by tests that craft traces.
#pragma once

#include <cstring>

#include "format/trace_format.h"
#include "format/varint.h"

namespace growtrace::format {

// Large enough for every fixed-field record; strings are truncated to fit.
inline constexpr size_t kMaxRecordBytes = 4096;

class RecordEncoder {
public:
    explicit RecordEncoder(RecordKind kind) : kind_(kind) {}

    RecordEncoder& varint(uint64_t v) {
        if (room() >= kMaxVarintBytes) p_ = put_varint(p_, v);
        else overflow_ = true;
        return *this;
    }
    RecordEncoder& svarint(int64_t v) { return varint(zigzag_encode(v)); }
    RecordEncoder& string(const void* data, size_t size) {
        size_t cap = room() > kMaxVarintBytes ? room() - kMaxVarintBytes : 0;
        if (size > cap) {
            size = cap;
            overflow_ = true;
        }
        p_ = put_varint(p_, size);
        if (size) std::memcpy(p_, data, size);
        p_ += size;
        return *this;
    }
    RecordEncoder& string(const char* s) { return string(s, s ? std::strlen(s) : 0); }

    // Writes kind, length and payload to out (which needs size() bytes); returns bytes written.
    size_t finish(uint8_t* out) const {
        size_t payload = static_cast<size_t>(p_ - payload_);
        uint8_t* q = out;
        *q++ = static_cast<uint8_t>(kind_);
        q = put_varint(q, payload);
        std::memcpy(q, payload_, payload);
        return static_cast<size_t>(q - out) + payload;
    }
    size_t size() const {
        size_t payload = static_cast<size_t>(p_ - payload_);
        return 1 + varint_size(payload) + payload;
    }
    bool truncated() const { return overflow_; }
    const uint8_t* payload() const { return payload_; }
    size_t payload_size() const { return static_cast<size_t>(p_ - payload_); }

private:
    size_t room() const { return static_cast<size_t>(payload_ + sizeof(payload_) - p_); }

    RecordKind kind_;
    bool overflow_ = false;
    uint8_t payload_[kMaxRecordBytes];
    uint8_t* p_ = payload_;
};

}  // namespace growtrace::format
