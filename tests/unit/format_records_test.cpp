// The record definitions of format/records.h: every kind of the enum has one, the spec names
// their fields, and each encodes and decodes back to itself (through every encoder), refusing
// a cut payload.
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "format/record_codec.h"
#include "format/records.h"

namespace growtrace::format {
namespace {

namespace fs = std::filesystem;

std::string read_repo_file(const std::string& relative) {
    std::ifstream in(fs::path(GROWTRACE_SOURCE_DIR) / relative);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// Fills every field of a record with values of the kind asked for: "small" (zeros and one-byte
// varints, short strings, one item per list, no trailing field) or "large" (multi-byte varints,
// negative svarints, long strings, three items per list, trailing fields present). The storage of
// strings and list items lives as long as the filler.
class Filler {
public:
    explicit Filler(bool large) : large_(large) {}

    void varint(const char*, uint64_t& v, Shown) {
        ++n_;
        v = large_ ? (uint64_t{1} << (7 * (n_ % 10))) + n_ : n_ - 1;
        last_ = &v;
    }
    void svarint(const char*, int64_t& v) {
        ++n_;
        v = large_ ? -(int64_t{1} << (7 * n_ % 63)) - static_cast<int64_t>(n_) : -static_cast<int64_t>(n_ % 2);
    }
    void string(const char* name, Bytes& b, Shown) {
        std::string text = large_ ? std::string(200, 'x') + name + std::string("\0\x01\xff", 3) : name;
        strings_.push_back(std::move(text));
        b = Bytes(strings_.back().data(), strings_.back().size());
    }
    template <class Item>
    void list(const char*, List<Item>& l, const ListRule&) {
        auto items = std::make_shared<std::vector<Item>>(large_ ? 3 : 1);
        for (Item& item : *items) Item::fields(*this, item);
        keep_.push_back(items);
        l = List<Item>::of(items->data(), items->size());
    }
    void trailing_varint(const char* name, uint64_t& v, bool& present) {
        present = large_;
        varint(name, v, Shown::Number);
    }
    void trailing_string(const char* name, Bytes& b, bool& present) {
        present = large_;
        string(name, b, Shown::Text);
    }
    // Keeps to the format's rules: a value just filled that breaks one becomes 1.
    void require(bool ok, const char*) {
        if (!ok && last_) *last_ = 1;
    }

private:
    bool large_;
    uint64_t n_ = 0;
    uint64_t* last_ = nullptr;
    std::deque<std::string> strings_;
    std::vector<std::shared_ptr<void>> keep_;
};

// A record as "name=value" lines, lists walked item by item: what equality and the spec check see.
class Flatten {
public:
    void varint(const char* name, uint64_t v, Shown) { add(name, std::to_string(v)); }
    void svarint(const char* name, int64_t v) { add(name, std::to_string(v)); }
    void string(const char* name, Bytes b, Shown) { add(name, std::string(b.chars() ? b.chars() : "", b.size)); }
    template <class Item>
    void list(const char* name, const List<Item>& l, const ListRule&) {
        add(name, "list of " + std::to_string(l.size()));
        l.for_each([this](const Item& item) { Item::fields(*this, item); });
        const Item none{};
        if (l.empty()) Item::fields(*this, none);  // the item's field names all the same
    }
    void trailing_varint(const char* name, uint64_t v, bool present) {
        if (present) varint(name, v, Shown::Number);
        else add(name, "absent");
    }
    void trailing_string(const char* name, Bytes b, bool present) {
        if (present) string(name, b, Shown::Text);
        else add(name, "absent");
    }
    void require(bool, const char*) {}

    std::vector<std::string> lines;
    std::set<std::string> names;

private:
    void add(const char* name, const std::string& value) {
        lines.push_back(std::string(name) + "=" + value);
        names.insert(name);
    }
};

template <class R>
Flatten flatten(const R& r) {
    Flatten f;
    R::fields(f, r);
    return f;
}

template <class R>
std::vector<uint8_t> encoded_payload(const R& r) {
    RecordEncoder enc(R::kKind);
    encode(enc, r);
    EXPECT_FALSE(enc.truncated()) << R::kName;
    return std::vector<uint8_t>(enc.payload(), enc.payload() + enc.payload_size());
}

// Runs check(record, description) on a small and a large record of every kind.
template <class Check>
void for_every_sample(Check check) {
    records::AllKinds::each([&](auto* kind) {
        using R = std::remove_pointer_t<decltype(kind)>;
        for (bool large : {false, true}) {
            Filler filler(large);
            R r{};
            R::fields(filler, r);
            check(r, std::string(R::kName) + (large ? " (large)" : " (small)"));
        }
    });
}

TEST(FormatRecords, EveryKindOfTheEnumHasADefinitionOfTheSameName) {
    const std::string header = read_repo_file("format/trace_format.h");
    const size_t begin = header.find("enum class RecordKind");
    const std::string body = header.substr(begin, header.find("};", begin) - begin);
    std::set<std::pair<std::string, int>> in_enum, defined;
    const std::regex entry(R"(\n\s*(\w+) = 0x([0-9a-fA-F]+),)");
    for (std::sregex_iterator m(body.begin(), body.end(), entry), end; m != end; ++m)
        in_enum.insert({(*m)[1], std::stoi((*m)[2], nullptr, 16)});
    records::AllKinds::each([&](auto* kind) {
        using R = std::remove_pointer_t<decltype(kind)>;
        defined.insert({R::kName, static_cast<int>(R::kKind)});
    });
    EXPECT_GE(in_enum.size(), 28u);
    EXPECT_EQ(in_enum, defined);
}

// Each row of the Records tables of docs/trace-format.md names every field of its kind.
TEST(FormatRecords, TheSpecNamesEveryFieldOfEveryKind) {
    const std::string spec = read_repo_file("docs/trace-format.md");
    ASSERT_FALSE(spec.empty());
    for_every_sample([&](const auto& r, const std::string& what) {
        using R = std::remove_cvref_t<decltype(r)>;
        const std::regex row_pattern("\\| 0x[0-9a-f]{2} \\| " + std::string(R::kName) + " \\|([^\n]*)");
        std::smatch row;
        ASSERT_TRUE(std::regex_search(spec, row, row_pattern)) << what << ": no row in the Records tables";
        for (const std::string& name : flatten(r).names)
            EXPECT_TRUE(std::regex_search(row[1].str(), std::regex("\\b" + name + "\\b")))
                << what << ": the spec's row does not name field " << name;
    });
}

TEST(FormatRecords, EveryKindDecodesToWhatWasEncoded) {
    for_every_sample([](const auto& r, const std::string& what) {
        using R = std::remove_cvref_t<decltype(r)>;
        const std::vector<uint8_t> payload = encoded_payload(r);
        Cursor c(payload.data(), payload.data() + payload.size());
        R back{};
        const char* why = nullptr;
        ASSERT_TRUE(decode(c, back, why)) << what << ": " << why;
        EXPECT_TRUE(c.at_end()) << what;
        EXPECT_EQ(flatten(back).lines, flatten(r).lines) << what;
        EXPECT_EQ(payload_size(r), payload.size()) << what;
    });
}

// put_record (the hot path's, no RecordEncoder) writes the very bytes RecordEncoder::finish does.
TEST(FormatRecords, PutRecordWritesWhatTheRecordEncoderWrites) {
    for_every_sample([](const auto& r, const std::string& what) {
        using R = std::remove_cvref_t<decltype(r)>;
        RecordEncoder enc(R::kKind);
        encode(enc, r);
        std::vector<uint8_t> expected(enc.size()), written(record_size(r) + 1, 0xee);
        enc.finish(expected.data());
        EXPECT_EQ(put_record(written.data(), r), expected.size()) << what;
        written.resize(expected.size());
        EXPECT_EQ(written, expected) << what;
    });
}

TEST(FormatRecords, ACutPayloadIsRefused) {
    for_every_sample([](const auto& r, const std::string& what) {
        using R = std::remove_cvref_t<decltype(r)>;
        const std::vector<uint8_t> payload = encoded_payload(r);
        const size_t trailing_from = [&] {  // a trailing field may be cut off whole: it is absent then
            R without = r;
            if constexpr (requires { without.has_launchers; }) without.has_launchers = false;
            if constexpr (requires { without.has_type_allocation; }) without.has_type_allocation = false;
            return payload_size(without);
        }();
        for (size_t cut = 0; cut < trailing_from; ++cut) {
            Cursor c(payload.data(), payload.data() + cut);
            R back{};
            const char* why = nullptr;
            EXPECT_FALSE(decode(c, back, why)) << what << " cut to " << cut << " bytes";
            EXPECT_NE(why, nullptr);
        }
    });
}

TEST(FormatRecords, ATrailingFieldCutOffOrDamagedIsAbsent) {
    records::TypeCreate r;
    r.module = Bytes::of("m");
    r.type_allocation = 300;
    r.has_type_allocation = true;
    std::vector<uint8_t> payload = encoded_payload(r);
    for (size_t keep : {payload.size() - 2, payload.size() - 1}) {  // none of it, half a varint
        Cursor c(payload.data(), payload.data() + keep);
        records::TypeCreate back;
        ASSERT_TRUE(decode(c, back));
        EXPECT_FALSE(back.has_type_allocation);
        EXPECT_EQ(c.remaining(), keep - (payload.size() - 2)) << "the cursor stays before the trailing field";
    }
}

TEST(FormatRecords, CountsAreCheckedAgainstTheBytesLeftBeforeAnyItemIsRead) {
    const uint8_t module[] = {0x10, 0, 0, 100, 1, 2};  // base, path "", build_id "", 100 segments
    Cursor c(module, module + sizeof module);
    records::Module m;
    const char* why = nullptr;
    EXPECT_FALSE(decode(c, m, why));
    EXPECT_STREQ(why, "segment count exceeds record size");

    const uint8_t short_lived[] = {5, 64, 0, 0};  // shift 64
    Cursor s(short_lived, short_lived + sizeof short_lived);
    records::ShortLivedSamples samples;
    EXPECT_FALSE(decode(s, samples, why));
    EXPECT_STREQ(why, "interval shift of 64 bits or more");

    const uint8_t truncated_string[] = {1, 5, 'a'};
    Cursor t(truncated_string, truncated_string + sizeof truncated_string);
    records::ThreadName name;
    EXPECT_FALSE(decode(t, name, why));
    EXPECT_STREQ(why, kStringPastEnd);
}

// A container lists at most 64 allocations and entries: a reader takes no more.
TEST(FormatRecords, ContainerListsAreCappedNotRefused) {
    std::vector<records::ContainerAllocation> many(70, records::ContainerAllocation{7});
    records::Container r;
    r.allocations = List<records::ContainerAllocation>::of(many.data(), many.size());
    const std::vector<uint8_t> payload = encoded_payload(r);
    Cursor c(payload.data(), payload.data() + payload.size());
    records::Container back;
    ASSERT_TRUE(decode(c, back));
    EXPECT_EQ(back.allocations.size(), 64u);
}

TEST(FormatRecords, AThreadEventsBodyIsItsRecordWithoutTheLeadingDticks) {
    for_every_sample([](const auto& r, const std::string& what) {
        using R = std::remove_cvref_t<decltype(r)>;
        if constexpr (requires { r.dticks; }) {
            RecordEncoder body(R::kKind);
            encode_after_dticks(body, r);
            RecordEncoder dticks(R::kKind);
            dticks.svarint(r.dticks);
            std::vector<uint8_t> joined(dticks.payload(), dticks.payload() + dticks.payload_size());
            joined.insert(joined.end(), body.payload(), body.payload() + body.payload_size());
            EXPECT_EQ(joined, encoded_payload(r)) << what;
        }
    });
}

TEST(FormatRecords, ListsMayBeProducedItemByItem) {
    struct Source {
        uint64_t starts[3] = {10, 20, 30};
    } source;
    records::Module m;
    m.segments = List<records::Segment>::produced(3, &source, [](const void* context, size_t i, records::Segment& out) {
        out.start = static_cast<const Source*>(context)->starts[i];
        out.size = 4;
    });
    const records::Segment array[3] = {{10, 4}, {20, 4}, {30, 4}};
    records::Module same;
    same.segments = List<records::Segment>::of(array, 3);
    EXPECT_EQ(encoded_payload(m), encoded_payload(same));
}

// The hot path's records fit the preload library's fixed room (SmallRecord: 2 + 4 varints).
static_assert(kMaxRecordBytesOf<records::Alloc> <= 2 + 4 * kMaxVarintBytes);
static_assert(kMaxRecordBytesOf<records::Free> <= 2 + 4 * kMaxVarintBytes);
static_assert(kMaxRecordBytesOf<records::StackNode> <= 2 + 4 * kMaxVarintBytes);
static_assert(kMaxPayloadBytesOf<records::AllocCompact> == 2 * kMaxVarintBytes);
static_assert(kMaxPayloadBytesOf<records::Process> == SIZE_MAX);

}  // namespace
}  // namespace growtrace::format
