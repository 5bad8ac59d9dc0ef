// The protocol buffers writer against the wire format's documented encodings, and the pprof
// profile's structure read back with a small decoder written here (go tool pprof reads the
// real files in tests/e2e/export_test.cpp).
#include <gtest/gtest.h>
#include <zlib.h>
#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "analyzer/report/export_pprof.h"
#include "analyzer/report/protobuf_writer.h"

namespace growtrace {
namespace {

std::string bytes_of(std::initializer_list<int> values) {
    std::string s;
    for (int v : values) s.push_back(static_cast<char>(v));
    return s;
}

TEST(ProtobufWriter, EncodesTheWireFormatsExamples) {
    proto::Writer w;
    w.uint64(1, 150);
    EXPECT_EQ(w.data(), bytes_of({0x08, 0x96, 0x01}));

    w.clear();
    w.bytes(2, "testing");
    EXPECT_EQ(w.data(), bytes_of({0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}));

    w.clear();
    w.packed(4, std::vector<uint64_t>{3, 270, 86942});
    EXPECT_EQ(w.data(), bytes_of({0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05}));

    // int64 -1: ten bytes, the sign extended (not zigzag).
    w.clear();
    w.int64(1, -1);
    EXPECT_EQ(w.data(), bytes_of({0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));

    // A nested message is its bytes, length-delimited; an empty packed list writes nothing.
    proto::Writer inner, outer;
    inner.uint64(1, 150);
    outer.message(3, inner);
    outer.packed(5, std::vector<int64_t>{});
    EXPECT_EQ(outer.data(), bytes_of({0x1a, 0x03, 0x08, 0x96, 0x01}));

    // Field numbers past 15 take a two-byte tag.
    w.clear();
    w.uint64(16, 1);
    EXPECT_EQ(w.data(), bytes_of({0x80, 0x01, 0x01}));
}

// A decoded message: field number -> the values (varints) or bytes (length-delimited), in order.
struct Message {
    std::multimap<uint32_t, uint64_t> varints;
    std::multimap<uint32_t, std::string> bytes;
    std::vector<uint64_t> packed(uint32_t field) const {
        std::vector<uint64_t> out;
        auto [a, b] = bytes.equal_range(field);
        for (auto it = a; it != b; ++it) {
            size_t i = 0;
            while (i < it->second.size()) out.push_back(read_varint(it->second, i));
        }
        return out;
    }
    std::vector<std::string> all(uint32_t field) const {
        std::vector<std::string> out;
        auto [a, b] = bytes.equal_range(field);
        for (auto it = a; it != b; ++it) out.push_back(it->second);
        return out;
    }
    uint64_t one(uint32_t field) const {
        auto it = varints.find(field);
        return it == varints.end() ? 0 : it->second;
    }
    static uint64_t read_varint(const std::string& s, size_t& i) {
        uint64_t v = 0;
        for (int shift = 0; i < s.size(); shift += 7) {
            const auto b = static_cast<unsigned char>(s[i++]);
            v |= uint64_t{b & 0x7fu} << shift;
            if (!(b & 0x80)) return v;
        }
        ADD_FAILURE() << "truncated varint";
        return v;
    }
};

Message decode(const std::string& s) {
    Message m;
    size_t i = 0;
    while (i < s.size()) {
        const uint64_t tag = Message::read_varint(s, i);
        const auto field = static_cast<uint32_t>(tag >> 3);
        if ((tag & 7) == 0) {
            m.varints.emplace(field, Message::read_varint(s, i));
        } else if ((tag & 7) == 2) {
            const uint64_t n = Message::read_varint(s, i);
            EXPECT_LE(i + n, s.size());
            m.bytes.emplace(field, s.substr(i, n));
            i += n;
        } else {
            ADD_FAILURE() << "unexpected wire type " << (tag & 7);
            break;
        }
    }
    return m;
}

Frame frame(const std::string& function, const std::string& file, uint32_t line, const std::string& module,
            uint64_t ip) {
    Frame f;
    f.function = function;
    f.file = file;
    f.line = line;
    f.module_path = module;
    f.ip = ip;
    return f;
}

TEST(PprofExport, ProfileHoldsSamplesMappingsAndLabels) {
    AnalysisResult r;
    r.pid = 4242;
    r.command = "python app.py";
    r.start_realtime_ns = 1'700'000'000'000'000'000;
    r.duration_s = 2.5;
    ModuleRecord lib;
    lib.path = "/usr/lib/libpython3.11.so.1.0";
    lib.base = 0x7f0000000000;
    lib.build_id = std::string("\xab\xcd", 2);
    lib.segments.push_back(Segment{0x7f0000001000, 0x2000});
    r.modules.push_back(lib);

    r.profile_frames = {frame("dictresize", "Objects/dictobject.c", 1200, lib.path, 0x7f0000001500),
                        frame("remember", "app.py", 21, "python", 0x8000000000000007),
                        frame("main", "app.py", 40, "python", 0x8000000000000008),
                        frame("0x1234", "", 0, "", 0x1234),
                        frame("idle", "app.py", 1, "python", 0x8000000000000009)};
    StackProfile grows;
    grows.frames = {0, 1, 2};
    grows.inuse_bytes = 3'000'000;
    grows.inuse_objects = 3000;
    grows.alloc_bytes = 3'500'000;
    grows.alloc_objects = 3500;
    grows.verdict = "unbounded";
    grows.growth_bytes_per_s = 1'200'000;
    grows.cache = "app._cache";
    StackProfile gone;
    gone.frames = {3, 2};
    gone.alloc_bytes = 100;
    gone.alloc_objects = 1;
    StackProfile nothing;  // all zero: left out
    nothing.frames = {4};
    r.stack_profiles = {grows, gone, nothing};

    const std::string data = pprof_profile({&r});
    const Message p = decode(data);
    const std::vector<std::string> strings = p.all(6);
    ASSERT_FALSE(strings.empty());
    EXPECT_EQ(strings[0], "");
    auto str = [&](uint64_t i) { return i < strings.size() ? strings[i] : std::string("<bad index>"); };

    std::vector<std::string> types;
    for (const std::string& t : p.all(1)) {
        const Message vt = decode(t);
        types.push_back(str(vt.one(1)) + "/" + str(vt.one(2)));
    }
    EXPECT_EQ(types, (std::vector<std::string>{"inuse_space/bytes", "inuse_objects/count", "alloc_space/bytes",
                                               "alloc_objects/count", "growth/bytes_per_second"}));
    EXPECT_EQ(str(p.one(14)), "inuse_space");
    EXPECT_EQ(p.one(9), r.start_realtime_ns);
    EXPECT_EQ(p.one(10), 2'500'000'000u);

    std::map<uint64_t, Message> mappings, locations, functions;
    for (const std::string& m : p.all(3)) mappings[decode(m).one(1)] = decode(m);
    for (const std::string& l : p.all(4)) locations[decode(l).one(1)] = decode(l);
    for (const std::string& f : p.all(5)) functions[decode(f).one(1)] = decode(f);
    std::map<std::string, Message> mapping_by_name;
    for (const auto& [id, m] : mappings) {
        EXPECT_EQ(m.one(7), 1u) << "has_functions";
        mapping_by_name[str(m.one(5))] = m;
    }
    ASSERT_EQ(mapping_by_name.size(), 3u);
    ASSERT_TRUE(mapping_by_name.count("[python]"));
    ASSERT_TRUE(mapping_by_name.count("[unknown]"));
    ASSERT_TRUE(mapping_by_name.count(lib.path));
    EXPECT_EQ(mapping_by_name[lib.path].one(2), 0x7f0000001000u);
    EXPECT_EQ(mapping_by_name[lib.path].one(3), 0x7f0000003000u);
    EXPECT_EQ(str(mapping_by_name[lib.path].one(6)), "abcd");

    const std::vector<std::string> samples = p.all(2);
    ASSERT_EQ(samples.size(), 2u) << "the all-zero stack is left out";
    const Message s0 = decode(samples[0]);
    EXPECT_EQ(s0.packed(2), (std::vector<uint64_t>{3'000'000, 3000, 3'500'000, 3500, 1'200'000}));
    std::vector<std::string> where;
    for (uint64_t id : s0.packed(1)) {
        ASSERT_TRUE(locations.count(id)) << id;
        const Message& loc = locations[id];
        const Message ln = decode(loc.all(4).at(0));
        const Message& fn = functions[ln.one(1)];
        where.push_back(fmt::format("{} {}:{} [{}]", str(fn.one(2)), str(fn.one(4)), ln.one(2),
                                    str(mappings[loc.one(2)].one(5))));
    }
    EXPECT_EQ(where, (std::vector<std::string>{"dictresize Objects/dictobject.c:1200 [" + lib.path + "]",
                                               "remember app.py:21 [[python]]", "main app.py:40 [[python]]"}));
    std::map<std::string, std::string> labels;
    for (const std::string& l : s0.all(3)) {
        const Message lm = decode(l);
        labels[str(lm.one(1))] = lm.varints.count(3) ? std::to_string(lm.one(3)) : str(lm.one(2));
    }
    EXPECT_EQ(labels, (std::map<std::string, std::string>{{"verdict", "unbounded"}, {"cache", "app._cache"},
                                                          {"pid", "4242"}}));
    // The shared main frame is one location.
    EXPECT_EQ(decode(samples[1]).packed(1).back(), s0.packed(1).back());
    EXPECT_EQ(decode(samples[1]).packed(2), (std::vector<uint64_t>{0, 0, 100, 1, 0}));
}

TEST(PprofExport, GzipRoundTrips) {
    const std::string data(100000, 'x');
    const std::string packed = gzip_compress(data);
    ASSERT_GE(packed.size(), 18u);
    EXPECT_EQ(static_cast<unsigned char>(packed[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>(packed[1]), 0x8b);
    std::string back(data.size() + 16, '\0');
    z_stream zs{};
    ASSERT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
    zs.avail_in = static_cast<uInt>(packed.size());
    zs.next_out = reinterpret_cast<Bytef*>(back.data());
    zs.avail_out = static_cast<uInt>(back.size());
    EXPECT_EQ(inflate(&zs, Z_FINISH), Z_STREAM_END);
    back.resize(zs.total_out);
    inflateEnd(&zs);
    EXPECT_EQ(back, data);
}

}  // namespace
}  // namespace growtrace
