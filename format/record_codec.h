// Encoding and decoding of the records of format/records.h, all derived from their field lists:
//   encode(RecordEncoder&, r)        into a RecordEncoder (bounded: strings are cut to fit)
//   encode_after_dticks(enc, r)      the same without a thread event's leading dticks (the
//                                    writer's thread-event path prepends it); likewise
//                                    put_payload_after_dticks(p, r) and decode_after_dticks(c, r)
//   put_record(out, r)               kind + length + payload straight into out, which has
//                                    record_size(r) bytes (kMaxRecordBytesOf<R> for records of
//                                    varints only): no copy, no checks, for the hot path
//   decode(Cursor&, r, why)          false on malformed input, `why` saying what was wrong
//   read_trusted(p, r)               a record of varints only that this process wrote itself,
//                                    read with no checks (the tracer's own buffers)
// Header-only, no allocation, no exceptions: the preload library uses it inside its hooks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "format/record_encoder.h"
#include "format/records.h"
#include "format/varint.h"

namespace growtrace::format {

// --- encoding ---

namespace codec_detail {

// Writes each field into a RecordEncoder; optionally leaves out a thread event's leading dticks.
// What every writer does alike: a trailing field is written when present, rules are the
// reader's to check.
template <class Writer>
class WritesTrailingWhenPresent {
public:
    void trailing_varint(const char* name, uint64_t v, bool present) {
        if (present) static_cast<Writer*>(this)->varint(name, v, Shown::Number);
    }
    void trailing_string(const char* name, Bytes b, bool present) {
        if (present) static_cast<Writer*>(this)->string(name, b, Shown::Text);
    }
    void require(bool, const char*) {}
};

class ToEncoder : public WritesTrailingWhenPresent<ToEncoder> {
public:
    ToEncoder(RecordEncoder& out, bool skip_leading_dticks) : out_(out), skip_(skip_leading_dticks) {}

    void varint(const char*, uint64_t v, Shown) {
        skip_ = false;
        out_.varint(v);
    }
    void svarint(const char*, int64_t v) {
        if (skip_) skip_ = false;
        else out_.svarint(v);
    }
    void string(const char*, Bytes b, Shown) {
        skip_ = false;
        out_.string(b.data, b.size);
    }
    template <class Item>
    void list(const char*, const List<Item>& items, const ListRule&) {
        skip_ = false;
        out_.varint(items.size());
        items.for_each([this](const Item& item) { Item::fields(*this, item); });
    }

private:
    RecordEncoder& out_;
    bool skip_;
};

// Writes each field at a raw pointer; the caller has made room (record_size).
class ToBytes : public WritesTrailingWhenPresent<ToBytes> {
public:
    explicit ToBytes(uint8_t* p) : p_(p) {}

    void varint(const char*, uint64_t v, Shown) { p_ = put_varint(p_, v); }
    void svarint(const char*, int64_t v) { p_ = put_varint(p_, zigzag_encode(v)); }
    void string(const char*, Bytes b, Shown) {
        p_ = put_varint(p_, b.size);
        if (b.size) std::memcpy(p_, b.data, b.size);
        p_ += b.size;
    }
    template <class Item>
    void list(const char*, const List<Item>& items, const ListRule&) {
        p_ = put_varint(p_, items.size());
        items.for_each([this](const Item& item) { Item::fields(*this, item); });
    }
    uint8_t* end() const { return p_; }

private:
    uint8_t* p_;
};

// Counts the payload bytes of a record (exact), or, on a default record at compile time, the
// most its varints can take (unbounded once it has a string or a list).
class PayloadSize {
public:
    explicit constexpr PayloadSize(bool worst_case) : worst_case_(worst_case) {}

    constexpr void varint(const char*, uint64_t v, Shown) { add(v); }
    constexpr void svarint(const char*, int64_t v) { add(zigzag_encode(v)); }
    constexpr void string(const char*, Bytes b, Shown) {
        bounded_ = false;
        bytes_ += varint_size(b.size) + b.size;
    }
    template <class Item>
    constexpr void list(const char*, const List<Item>& items, const ListRule&) {
        bounded_ = false;
        if (worst_case_) return;  // unbounded: the items need not be looked at
        bytes_ += varint_size(items.size());
        items.for_each([this](const Item& item) { Item::fields(*this, item); });
    }
    constexpr void trailing_varint(const char* name, uint64_t v, bool present) {
        if (present || worst_case_) varint(name, v, Shown::Number);
    }
    constexpr void trailing_string(const char* name, Bytes b, bool present) {
        if (present || worst_case_) string(name, b, Shown::Text);
    }
    constexpr void require(bool, const char*) {}
    constexpr size_t bytes() const { return bytes_; }
    constexpr bool bounded() const { return bounded_; }

private:
    constexpr void add(uint64_t v) { bytes_ += worst_case_ ? kMaxVarintBytes : varint_size(v); }

    bool worst_case_;
    bool bounded_ = true;
    size_t bytes_ = 0;
};

template <class R>
constexpr size_t max_payload_bytes() {
    R r{};
    PayloadSize size(true);
    R::fields(size, r);
    return size.bounded() ? size.bytes() : SIZE_MAX;
}

}  // namespace codec_detail

// The largest payload of a record of R's kind, when it holds varints only (SIZE_MAX otherwise).
template <class R>
inline constexpr size_t kMaxPayloadBytesOf = codec_detail::max_payload_bytes<R>();
// The largest whole record (kind, length, payload) of a kind that holds varints only.
template <class R>
inline constexpr size_t kMaxRecordBytesOf = 1 + varint_size(kMaxPayloadBytesOf<R>) + kMaxPayloadBytesOf<R>;

template <class R>
size_t payload_size(const R& r) {
    codec_detail::PayloadSize size(false);
    R::fields(size, r);
    return size.bytes();
}

// Bytes put_record(out, r) writes.
template <class R>
size_t record_size(const R& r) {
    const size_t payload = payload_size(r);
    return 1 + varint_size(payload) + payload;
}

// Appends r's fields to enc, which was made for R::kKind.
template <class R>
RecordEncoder& encode(RecordEncoder& enc, const R& r) {
    codec_detail::ToEncoder to(enc, false);
    R::fields(to, r);
    return enc;
}

// The fields of a thread event after its leading dticks: the body the writer's thread-event path
// (which prepends the dticks of the run's clock) takes.
template <class R>
RecordEncoder& encode_after_dticks(RecordEncoder& enc, const R& r) {
    codec_detail::ToEncoder to(enc, true);
    R::fields(to, r);
    return enc;
}

namespace codec_detail {
// Leaves out a thread event's leading dticks, writing the rest as Writer does.
template <class Writer>
class AfterDticks : public Writer {
public:
    using Writer::Writer;
    void svarint(const char* name, int64_t v) {
        if (skip_) skip_ = false;
        else Writer::svarint(name, v);
    }
    void varint(const char* name, uint64_t v, Shown shown) {
        skip_ = false;
        Writer::varint(name, v, shown);
    }

private:
    bool skip_ = true;
};
}  // namespace codec_detail

// Writes r's fields after its leading dticks at p (a thread event's body); returns the end.
template <class R>
uint8_t* put_payload_after_dticks(uint8_t* p, const R& r) {
    codec_detail::AfterDticks<codec_detail::ToBytes> to(p);
    R::fields(to, r);
    return to.end();
}

// Writes r's payload at p; returns the end. p has payload_size(r) bytes.
template <class R>
uint8_t* put_payload(uint8_t* p, const R& r) {
    codec_detail::ToBytes to(p);
    R::fields(to, r);
    return to.end();
}

// Writes kind, length and payload at out; returns the bytes written (record_size(r)). A record
// of varints only whose payload stays under 128 bytes has a one-byte length, written after the
// payload: one pass, no copy.
template <class R>
size_t put_record(uint8_t* out, const R& r) {
    out[0] = static_cast<uint8_t>(R::kKind);
    if constexpr (kMaxPayloadBytesOf<R> < 0x80) {
        uint8_t* end = put_payload(out + 2, r);
        out[1] = static_cast<uint8_t>(end - out - 2);
        return static_cast<size_t>(end - out);
    } else {
        uint8_t* body = put_varint(out + 1, payload_size(r));
        return static_cast<size_t>(put_payload(body, r) - out);
    }
}

// --- decoding ---

namespace codec_detail {

// Reads each varint field from a raw pointer with no bounds check: for records a process reads
// back from its own memory (the tracer's per-thread buffers, which hold nothing but what its
// hooks encoded), never for a file. Records of varints only.
class FromTrusted {
public:
    explicit FromTrusted(const uint8_t* p) : p_(p) {}

    void varint(const char*, uint64_t& v, Shown) { v = take(); }
    void svarint(const char*, int64_t& v) { v = zigzag_decode(take()); }
    template <class T>
    void string(const char*, T&, Shown) {
        static_assert(sizeof(T) == 0, "read_trusted is for records of varints only");
    }
    template <class L, class Rule>
    void list(const char*, L&, const Rule&) {
        static_assert(sizeof(L) == 0, "read_trusted is for records of varints only");
    }
    const uint8_t* end() const { return p_; }

private:
    uint64_t take() {
        uint64_t v = *p_ & 0x7fu;
        for (unsigned shift = 7; *p_++ & 0x80; shift += 7) v |= uint64_t{*p_ & 0x7fu} << shift;
        return v;
    }
    const uint8_t* p_;
};

}  // namespace codec_detail

// Reads the payload at p of a record of varints only that this process wrote itself (no checks);
// returns the end of what it read.
template <class R>
const uint8_t* read_trusted(const uint8_t* p, R& r) {
    static_assert(kMaxPayloadBytesOf<R> != SIZE_MAX, "read_trusted is for records of varints only");
    codec_detail::FromTrusted from(p);
    R::fields(from, r);
    return from.end();
}

inline constexpr const char* kShortPayload = "payload too short or malformed varint";
inline constexpr const char* kStringPastEnd = "string runs past the end of the record";

namespace codec_detail {

// Reads each field from a cursor. After the first failure it reads nothing more and keeps the
// reason; a trailing field that is absent or does not parse is left out, the cursor where it was.
class FromCursor {
public:
    explicit FromCursor(Cursor& c) : c_(c) {}

    void varint(const char*, uint64_t& v, Shown) {
        if (!error_ && !c_.varint(v)) error_ = kShortPayload;
    }
    void svarint(const char*, int64_t& v) {
        if (!error_ && !c_.svarint(v)) error_ = kShortPayload;
    }
    void string(const char*, Bytes& b, Shown) {
        if (!error_ && !c_.bytes(b.data, b.size)) error_ = kStringPastEnd;
    }
    template <class Item>
    void list(const char*, List<Item>& items, const ListRule& rule);
    void trailing_varint(const char*, uint64_t& v, bool& present) {
        if (error_) return;
        Cursor attempt = c_;
        present = !c_.at_end() && attempt.varint(v);
        if (present) c_ = attempt;
    }
    void trailing_string(const char*, Bytes& b, bool& present) {
        if (error_) return;
        Cursor attempt = c_;
        present = !c_.at_end() && attempt.bytes(b.data, b.size);
        if (present) c_ = attempt;
    }
    void require(bool ok, const char* why) {
        if (!error_ && !ok) error_ = why;
    }
    const char* error() const { return error_; }

private:
    Cursor& c_;
    const char* error_ = nullptr;
};

// The same for a thread event's body, which starts after the record's leading dticks.
class FromCursorAfterDticks : public FromCursor {
public:
    using FromCursor::FromCursor;
    void svarint(const char* name, int64_t& v) {
        if (skip_) skip_ = false;
        else FromCursor::svarint(name, v);
    }
    void varint(const char* name, uint64_t& v, Shown shown) {
        skip_ = false;
        FromCursor::varint(name, v, shown);
    }

private:
    bool skip_ = true;
};

template <class Item>
void FromCursor::list(const char*, List<Item>& items, const ListRule& rule) {
    uint64_t count = 0;
    varint("count", count, Shown::Number);
    if (error_) return;
    // Checked before any item is read: a bogus count costs nothing.
    if (rule.min_item_bytes && count > c_.remaining() / rule.min_item_bytes) {
        error_ = rule.count_error;
        return;
    }
    if (rule.max_items && count > rule.max_items) count = rule.max_items;
    const uint8_t* begin = c_.position();
    for (uint64_t i = 0; i < count && !error_; ++i) {
        Item item{};
        Item::fields(*this, item);
    }
    if (!error_) items = List<Item>::encoded(static_cast<size_t>(count), begin, c_.position());
}

}  // namespace codec_detail

// Reads r's fields from c. False when the payload is malformed: why then says what was wrong
// (one of the messages above, or a list's count_error, or a require's reason). Bytes after the
// known fields are left unread (a newer writer may append fields).
template <class R>
bool decode(Cursor& c, R& r, const char*& why) {
    codec_detail::FromCursor from(c);
    R::fields(from, r);
    why = from.error();
    return why == nullptr;
}

template <class R>
bool decode(Cursor& c, R& r) {
    const char* why;
    return decode(c, r, why);
}

// Reads a thread event's body: r's fields after its leading dticks (left as it was in r).
template <class R>
bool decode_after_dticks(Cursor& c, R& r) {
    codec_detail::FromCursorAfterDticks from(c);
    R::fields(from, r);
    return from.error() == nullptr;
}

// Walks the items, however the list was made. A decoded list's bytes were checked when it was
// read, so decoding them again cannot fail.
template <class Item>
template <class F>
void List<Item>::for_each(F&& f) const {
    if (items_) {
        for (size_t i = 0; i < count_; ++i) f(items_[i]);
    } else if (produce_) {
        for (size_t i = 0; i < count_; ++i) {
            Item item{};
            produce_(context_, i, item);
            f(static_cast<const Item&>(item));
        }
    } else if (encoded_) {
        Cursor c(encoded_, encoded_end_);
        for (size_t i = 0; i < count_; ++i) {
            Item item{};
            decode(c, item);
            f(static_cast<const Item&>(item));
        }
    }
}

}  // namespace growtrace::format
