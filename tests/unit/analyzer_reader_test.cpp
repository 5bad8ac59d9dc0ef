// Trace reader: round trip of every record kind, version handling, and every corruption the
// reader must reject with a message that says where.
#include <gtest/gtest.h>

#include <filesystem>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "analyzer/read/record_decoder.h"
#include "analyzer/read/trace_error.h"
#include "format/checksum.h"
#include "trace_builder.h"

namespace growtrace {
namespace {

using testing::TraceBuilder;
using testing::temp_trace_path;
using testing::write_file;

struct Collector : RecordVisitor {
    std::vector<ProcessRecord> processes;
    std::vector<ModuleRecord> modules;
    std::vector<ModulesResetRecord> resets;
    std::vector<ThreadRecord> threads;
    std::vector<StackNodeRecord> nodes;
    std::vector<PyFrameRecord> py_frames;
    std::vector<ThreadNameRecord> names;
    std::vector<AllocEvent> allocs;
    std::vector<FreeEvent> frees;
    std::vector<AllocCompactEvent> compact_allocs;
    std::vector<FreeCompactEvent> compact_frees;
    std::vector<TimeMarkRecord> marks;
    std::vector<EndRecord> ends;
    std::vector<ForkRecord> forks;
    std::vector<ExecRecord> execs;
    std::vector<TracerErrorRecord> errors;
    std::vector<uint8_t> unknown_kinds;
    std::vector<CacheMissesRecord> miss_counts;
    std::vector<ShortLivedSamplesRecord> short_lived;

    void on_process(const ProcessRecord& r) override { processes.push_back(r); }
    void on_module(const ModuleRecord& r) override { modules.push_back(r); }
    void on_modules_reset(const ModulesResetRecord& r) override { resets.push_back(r); }
    void on_thread(const ThreadRecord& r) override { threads.push_back(r); }
    void on_stack_node(const StackNodeRecord& r) override { nodes.push_back(r); }
    void on_py_frame(const PyFrameRecord& r) override { py_frames.push_back(r); }
    void on_thread_name(const ThreadNameRecord& r) override { names.push_back(r); }
    void on_alloc(const AllocEvent& e) override { allocs.push_back(e); }
    void on_free(const FreeEvent& e) override { frees.push_back(e); }
    void on_alloc_compact(const AllocCompactEvent& e) override { compact_allocs.push_back(e); }
    void on_free_compact(const FreeCompactEvent& e) override { compact_frees.push_back(e); }
    void on_time_mark(const TimeMarkRecord& r) override { marks.push_back(r); }
    void on_end(const EndRecord& r) override { ends.push_back(r); }
    void on_fork(const ForkRecord& r) override { forks.push_back(r); }
    void on_exec(const ExecRecord& r) override { execs.push_back(r); }
    void on_tracer_error(const TracerErrorRecord& r) override { errors.push_back(r); }
    void on_unknown(const RawRecord& r) override { unknown_kinds.push_back(r.kind); }
    void on_cache_misses(const CacheMissesRecord& r) override { miss_counts.push_back(r); }
    void on_short_lived_samples(const ShortLivedSamplesRecord& r) override { short_lived.push_back(r); }
};

std::string read_error(const std::string& path) {
    Collector c;
    try {
        read_trace(path, c);
    } catch (const TraceError& e) {
        return e.what();
    }
    return "";
}

std::string read_error(const std::vector<uint8_t>& bytes, const std::string& name) {
    const std::string path = temp_trace_path(name);
    write_file(path, bytes);
    return read_error(path);
}

TraceBuilder every_kind() {
    TraceBuilder b;
    b.process(4242, 1000, 5000, "/usr/bin/app", std::string("app\0--flag", 10));
    b.module(0x400000, "/usr/bin/app", "\x01\x02", {{0x401000, 0x2000}, {0x500000, 0x100}});
    b.stack_node(1, 0, 0x401234).stack_node(2, 1, format::kPythonFrameTag | 7);
    b.py_frame(7, "app.py", "handler", 42);
    b.thread_name(11, "worker");
    b.thread(11, 2000).alloc(2010, 64, 0x10000, 2).free(2005, 0xfff0).alloc(2020, 8, 0x20000, 1);
    b.end_block(format::Codec::Zstd);
    b.modules_reset(2100).module(0x7f0000, "/lib/x.so", "", {});
    b.time_mark(2200, 6000, 1 << 20);
    b.fork(4243, "/tmp/t.4243.gtrace").exec("/tmp/t.exec1.gtrace").tracer_error(2300, "lost 3 events");
    b.end(2400, 7000);
    return b;
}

TEST(AnalyzerReader, RoundTripsEveryRecordKind) {
    for (auto codec : {format::Codec::Raw, format::Codec::Zstd, format::Codec::ZstdWithPrefix}) {
        const std::string path = temp_trace_path("roundtrip");
        every_kind().write(path, format::kVersion, codec);
        Collector c;
        ReadSummary s = read_trace(path, c);
        EXPECT_TRUE(s.ended_cleanly);
        EXPECT_EQ(s.version, format::kVersion);
        EXPECT_EQ(s.blocks, 2u);
        ASSERT_EQ(c.processes.size(), 1u);
        EXPECT_EQ(c.processes[0].pid, 4242u);
        EXPECT_EQ(c.processes[0].start_ticks, 1000u);
        EXPECT_EQ(c.processes[0].start_monotonic_ns, 5000u);
        EXPECT_EQ(c.processes[0].exe, "/usr/bin/app");
        EXPECT_EQ(c.processes[0].argv, (std::vector<std::string>{"app", "--flag"}));
        ASSERT_EQ(c.modules.size(), 2u);
        EXPECT_EQ(c.modules[0].base, 0x400000u);
        EXPECT_EQ(c.modules[0].build_id, "\x01\x02");
        ASSERT_EQ(c.modules[0].segments.size(), 2u);
        EXPECT_EQ(c.modules[0].segments[1].start, 0x500000u);
        EXPECT_EQ(c.modules[0].segments[1].size, 0x100u);
        EXPECT_EQ(c.modules[1].path, "/lib/x.so");
        ASSERT_EQ(c.resets.size(), 1u);
        EXPECT_EQ(c.resets[0].ticks, 2100u);
        ASSERT_EQ(c.nodes.size(), 2u);
        EXPECT_EQ(c.nodes[1].ip, format::kPythonFrameTag | 7);
        EXPECT_EQ(c.nodes[1].parent, 1u);
        ASSERT_EQ(c.py_frames.size(), 1u);
        EXPECT_EQ(c.py_frames[0].function, "handler");
        EXPECT_EQ(c.py_frames[0].line, 42u);
        ASSERT_EQ(c.names.size(), 1u);
        EXPECT_EQ(c.names[0].name, "worker");
        ASSERT_EQ(c.threads.size(), 1u);
        // Deltas, including a negative tick delta and a negative address delta, are applied.
        ASSERT_EQ(c.allocs.size(), 2u);
        EXPECT_EQ(c.allocs[0].ticks, 2010u);
        EXPECT_EQ(c.allocs[0].addr, 0x10000u);
        EXPECT_EQ(c.allocs[0].size, 64u);
        EXPECT_EQ(c.allocs[0].stack_id, 2u);
        EXPECT_EQ(c.allocs[0].tid, 11u);
        ASSERT_EQ(c.frees.size(), 1u);
        EXPECT_EQ(c.frees[0].ticks, 2005u);
        EXPECT_EQ(c.frees[0].addr, 0xfff0u);
        EXPECT_EQ(c.allocs[1].ticks, 2020u);
        EXPECT_EQ(c.allocs[1].addr, 0x20000u);
        ASSERT_EQ(c.marks.size(), 1u);
        EXPECT_EQ(c.marks[0].rss_bytes, 1u << 20);
        ASSERT_EQ(c.forks.size(), 1u);
        EXPECT_EQ(c.forks[0].child_pid, 4243u);
        ASSERT_EQ(c.execs.size(), 1u);
        EXPECT_EQ(c.execs[0].path, "/tmp/t.exec1.gtrace");
        ASSERT_EQ(c.errors.size(), 1u);
        EXPECT_EQ(c.errors[0].message, "lost 3 events");
        ASSERT_EQ(c.ends.size(), 1u);
        EXPECT_EQ(c.ends[0].monotonic_ns, 7000u);
        EXPECT_TRUE(c.unknown_kinds.empty());
    }
}

// A block of codec ZstdWithPrefix (version 5, sampled traces) refers back into the block
// before: what repeats costs almost nothing, and the reader needs that block to decode it.
TraceBuilder repeated_frames(format::Codec first_codec, size_t* first_block_end = nullptr) {
    TraceBuilder b;
    b.process(4242, 1000, 5000, "/usr/bin/app", "app");
    // Names that do not repeat within a block (so that they compress poorly on their own).
    auto frames = [&](uint64_t first_id) {
        uint64_t state = 88172645463325252ull;
        auto word = [&] {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            return std::to_string(state);
        };
        for (uint64_t i = 0; i < 200; ++i) b.py_frame(first_id + i, "/srv/" + word() + ".py", "f_" + word(), 10 + i);
    };
    frames(1);
    b.end_block(first_codec);
    if (first_block_end) *first_block_end = b.size_so_far();
    frames(1001);
    return b;
}

TEST(AnalyzerReader, PrefixedBlockStoresWhatRepeatsTheBlockBeforeInLittle) {
    const std::string prefixed = temp_trace_path("prefixed"), alone = temp_trace_path("alone");
    repeated_frames(format::Codec::Zstd).write(prefixed, format::kSampledVersion, format::Codec::ZstdWithPrefix);
    repeated_frames(format::Codec::Zstd).write(alone, format::kSampledVersion, format::Codec::Zstd);
    Collector c;
    ReadSummary s = read_trace(prefixed, c);
    ASSERT_EQ(s.blocks, 2u);
    ASSERT_EQ(c.py_frames.size(), 400u);
    EXPECT_EQ(c.py_frames[399].id, 1200u);
    EXPECT_EQ(c.py_frames[399].function, c.py_frames[199].function);
    EXPECT_LT(std::filesystem::file_size(prefixed) * 10, std::filesystem::file_size(alone) * 6)
        << "the second block is mostly references into the first";
}

TEST(AnalyzerReader, PrefixedBlockWithoutItsBlockBeforeIsAnError) {
    size_t first_end = 0;
    auto bytes = repeated_frames(format::Codec::Zstd, &first_end).bytes(format::kSampledVersion,
                                                                        format::Codec::ZstdWithPrefix);
    bytes.erase(bytes.begin() + sizeof(format::FileHeader), bytes.begin() + static_cast<std::ptrdiff_t>(first_end));
    EXPECT_NE(read_error(bytes, "prefix_first").find("block 0 at offset 16: the first block refers to a block before it"),
              std::string::npos)
        << read_error(bytes, "prefix_first");
    auto old = repeated_frames(format::Codec::Zstd).bytes(4, format::Codec::ZstdWithPrefix);
    EXPECT_NE(read_error(old, "prefix_v4").find("codec 2 is not used before format version 5"), std::string::npos)
        << read_error(old, "prefix_v4");
}

TEST(AnalyzerReader, AcceptsVersionOne) {
    const std::string path = temp_trace_path("v1");
    every_kind().write(path, 1);
    Collector c;
    EXPECT_EQ(read_trace(path, c).version, 1u);
}

TEST(AnalyzerReader, RejectsNewerVersionWithMessage) {
    auto bytes = every_kind().bytes(format::kVersion + 1);
    EXPECT_EQ(read_error(bytes, "newer"),
              "trace format version " + std::to_string(format::kVersion + 1) +
                  " is newer than this analyzer supports (max " + std::to_string(format::kVersion) + ")");
}

TEST(AnalyzerReader, RejectsBadMagic) {
    auto bytes = every_kind().bytes();
    bytes[0] = 'X';
    EXPECT_NE(read_error(bytes, "magic").find("not a growtrace trace"), std::string::npos);
}

TEST(AnalyzerReader, RejectsZeroLengthAndMissingFiles) {
    EXPECT_NE(read_error(std::vector<uint8_t>{}, "empty").find("empty (0 bytes)"), std::string::npos);
    EXPECT_NE(read_error("/nonexistent/dir/x.gtrace").find("cannot open trace"), std::string::npos);
}

TEST(AnalyzerReader, TruncatedMidBlockNamesOffset) {
    TraceBuilder b;
    b.process(1, 0, 0).end_block();
    const size_t second_block = b.size_so_far();
    b.thread(1, 0);
    for (int i = 0; i < 100; ++i) b.alloc(i, 16, 0x1000 + 16 * i, 1);
    auto bytes = b.bytes();
    bytes.resize(bytes.size() - 10);
    const std::string msg = read_error(bytes, "truncated");
    EXPECT_NE(msg.find("truncated trace: block 1 at offset " + std::to_string(second_block) + " needs"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("file ends after"), std::string::npos) << msg;
}

TEST(AnalyzerReader, RejectsCorruptZstd) {
    TraceBuilder b;
    b.process(1, 0, 0);
    for (int i = 0; i < 50; ++i) b.thread(1, i).alloc(i, 16, 0x1000, 1);
    auto bytes = b.bytes(format::kVersion, format::Codec::Zstd);
    // Damage the compressed frame's middle.
    for (size_t i = 16 + 16 + 8; i < bytes.size() - 4; i += 3) bytes[i] ^= 0x5a;
    const std::string msg = read_error(bytes, "zstd");
    EXPECT_NE(msg.find("corrupt trace: block 0 at offset 16"), std::string::npos) << msg;
}

TEST(AnalyzerReader, RejectsBlockSizesOverLimitWithoutAllocating) {
    auto bytes = every_kind().bytes();
    // Block 0 header starts at 16; stored_size at +8, raw_size at +12.
    bytes[16 + 11] = 0x7f;
    EXPECT_NE(read_error(bytes, "huge").find("exceed the maximum"), std::string::npos);
}

TEST(AnalyzerReader, RejectsRecordRunningPastBlockEnd) {
    TraceBuilder b;
    b.process(1, 0, 0);
    b.raw_record(0x10, {});  // placeholder, replaced below
    auto bytes = b.bytes(2);  // version 3's checksum would catch the change first
    // The last record is "0x10 0x00": make its length 100.
    bytes.back() = 100;
    const std::string msg = read_error(bytes, "pastend");
    EXPECT_NE(msg.find("runs past the block end"), std::string::npos) << msg;
    EXPECT_NE(msg.find("record Alloc"), std::string::npos) << msg;
}

TEST(AnalyzerReader, RejectsMalformedPayload) {
    TraceBuilder b;
    b.process(1, 0, 0).thread(1, 0).raw_record(0x10, {0x80, 0x80});
    const std::string msg = read_error(b.bytes(), "malformed");
    EXPECT_NE(msg.find("record Alloc at payload offset"), std::string::npos) << msg;
}

TEST(AnalyzerReader, RejectsBadBlockMagic) {
    auto bytes = every_kind().bytes();
    bytes[16] ^= 0xff;
    EXPECT_NE(read_error(bytes, "blockmagic").find("bad block magic"), std::string::npos);
}

TEST(AnalyzerReader, SkipsUnknownRecordKinds) {
    TraceBuilder b;
    b.process(1, 0, 0).raw_record(0x7e, {1, 2, 3, 4}).raw_record(0x6f, {9}).thread(1, 0).alloc(5, 10, 0x10, 1);
    b.end(10, 10);
    const std::string path = temp_trace_path("unknown");
    b.write(path);
    Collector c;
    read_trace(path, c);
    EXPECT_EQ(c.unknown_kinds, (std::vector<uint8_t>{0x7e, 0x6f}));
    ASSERT_EQ(c.allocs.size(), 1u);
    EXPECT_EQ(c.allocs[0].size, 10u);
}

TEST(AnalyzerReader, CPythonThreadEventsAdvanceTheRunTicks) {
    // TypeCreate (0x32): svarint dticks (+10, zigzag 20), source, address, stack, then three
    // empty strings (module, qualname, metaclass).
    TraceBuilder b;
    b.process(1, 0, 0).thread(1, 100).raw_record(0x32, {20, 0, 0, 0, 0, 0, 0}).alloc(115, 8, 0x10, 1);
    const std::string path = temp_trace_path("pyevent");
    b.write(path);
    Collector c;
    read_trace(path, c);
    ASSERT_EQ(c.allocs.size(), 1u);
    // The builder wrote the alloc's delta from 100 (it does not know about the CPython event),
    // so the reader must put it at 110 + 15.
    EXPECT_EQ(c.allocs[0].ticks, 125u);
}

TEST(AnalyzerReader, DecodesVersionTwoCompactEvents) {
    if (format::kVersion < 2) GTEST_SKIP() << "format/trace_format.h does not define version 2 yet";
    // Time +5 (zigzag 10), AllocCompact size 32 stack 4 (#1), AllocCompact size 8 stack 4 (#2),
    // Time +3, FreeCompact age 1 (= #1), then a FreeCompact naming an allocation before #1.
    TraceBuilder b;
    b.process(1, 0, 0).thread(7, 100);
    b.raw_record(kKindTime, {10}).raw_record(kKindAllocCompact, {32, 4}).raw_record(kKindAllocCompact, {8, 4});
    b.raw_record(kKindTime, {6}).raw_record(kKindFreeCompact, {1});
    const std::string path = temp_trace_path("v2");
    b.write(path, 2);
    Collector c;
    read_trace(path, c);
    ASSERT_EQ(c.compact_allocs.size(), 2u);
    EXPECT_EQ(c.compact_allocs[0].ticks, 105u);
    EXPECT_EQ(c.compact_allocs[0].seq, 1u);
    EXPECT_EQ(c.compact_allocs[1].size, 8u);
    EXPECT_EQ(c.compact_allocs[1].seq, 2u);
    ASSERT_EQ(c.compact_frees.size(), 1u);
    EXPECT_EQ(c.compact_frees[0].seq, 1u);
    EXPECT_EQ(c.compact_frees[0].ticks, 108u);
    EXPECT_EQ(c.compact_frees[0].tid, 7u);

    b.raw_record(kKindFreeCompact, {2});
    EXPECT_NE(read_error(b.bytes(2), "v2bad").find("FreeCompact"), std::string::npos);
}

TEST(AnalyzerReader, FileEndingAtBlockBoundaryWithoutEndIsNotAnError) {
    TraceBuilder b;
    b.process(1, 0, 0).thread(1, 0).alloc(5, 10, 0x10, 1).end_block(format::Codec::Zstd);
    b.thread(1, 6).free(7, 0x10);
    const std::string path = temp_trace_path("killed");
    b.write(path);
    Collector c;
    ReadSummary s = read_trace(path, c);
    EXPECT_FALSE(s.ended_cleanly);
    EXPECT_EQ(c.allocs.size(), 1u);
    EXPECT_EQ(c.frees.size(), 1u);
}

TEST(FormatChecksum, IsCrc32c) {
    EXPECT_EQ(format::crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C check value
    EXPECT_EQ(format::crc32c("", 0), 0u);
    const std::string text = "a longer text, so that the eight-byte steps and the tail both run";
    for (size_t cut = 0; cut <= text.size(); ++cut)
        EXPECT_EQ(format::crc32c_update(format::crc32c(text.data(), cut), text.data() + cut, text.size() - cut),
                  format::crc32c(text.data(), text.size()));
}

TEST(AnalyzerReader, ChecksumMismatchNamesTheBlock) {
    TraceBuilder b;
    b.process(1, 0, 0).end_block();
    const size_t second_block = b.size_so_far();
    b.thread(1, 0).alloc(5, 10, 0x10, 1);
    auto bytes = b.bytes();
    bytes.back() ^= 0x04;  // the Alloc's stack id: still a well-formed record
    const std::string msg = read_error(bytes, "checksum");
    EXPECT_NE(msg.find("corrupt trace: block 1 at offset " + std::to_string(second_block) + ": checksum mismatch"),
              std::string::npos)
        << msg;
    // Version 2 has no checksum: the same change is read without a word.
    auto v2 = b.bytes(2);
    v2.back() ^= 0x04;
    EXPECT_EQ(read_error(v2, "nochecksum"), "");
}

TEST(AnalyzerReader, VersionThreeKnowsItsFlags) {
    auto bytes = every_kind().bytes();
    ASSERT_EQ(bytes[12], format::kFlagBlockChecksums);
    bytes[13] ^= 0x10;
    EXPECT_NE(read_error(bytes, "flags").find("file header flags 0x00001001 at offset 12"), std::string::npos);
    bytes[13] ^= 0x10;
    bytes[12] = 0;  // a version 3 trace without its checksums
    EXPECT_NE(read_error(bytes, "noflags").find("file header flags"), std::string::npos);
}

// Flipping any 1, 2 or 3 bits of a version 3 trace is reported: never a silent, different read.
// (Version 5 as well, with its prefixed blocks: a flip of its version to 4 would be read alike
// but for those blocks, which version 4 does not have.)
// Every flip of 1 bit, and 3,000 flips of 2 or 3, of `good`: each is reported.
void expect_every_bit_flip_is_an_error(const std::vector<uint8_t>& good) {
    const std::string path = temp_trace_path("bitflip");
    auto expect_error = [&](const std::vector<uint8_t>& bytes, const std::string& what) {
        write_file(path, bytes);
        Collector c;
        try {
            read_trace(path, c);
            ADD_FAILURE() << "read without error after flipping " << what;
        } catch (const TraceError&) {
        }
    };
    for (size_t bit = 0; bit < good.size() * 8; ++bit) {
        auto bytes = good;
        bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        expect_error(bytes, "bit " + std::to_string(bit));
    }
    uint64_t state = 12345;
    auto next = [&] { return (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
    for (int trial = 0; trial < 3000; ++trial) {
        auto bytes = good;
        int flips = 2 + trial % 2;
        std::string what;
        for (int f = 0; f < flips; ++f) {
            size_t bit = next() % (good.size() * 8);
            bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
            what += " " + std::to_string(bit);
        }
        if (bytes != good) expect_error(bytes, "bits" + what);
    }
}

TEST(AnalyzerReader, EveryBitFlipInAVersionThreeTraceIsAnError) {
    for (auto [version, codec] : {std::pair{format::kFullVersion, format::Codec::Raw},
                                  std::pair{format::kFullVersion, format::Codec::Zstd},
                                  std::pair{format::kSampledVersion, format::Codec::ZstdWithPrefix}})
        expect_every_bit_flip_is_an_error(every_kind().bytes(version, codec));
}

TEST(AnalyzerReader, NeverCrashesOnByteFlips) {
    // Every single-byte corruption either reads or throws TraceError; nothing else.
    auto good = every_kind().bytes(format::kVersion, format::Codec::Raw);
    for (size_t i = 0; i < good.size(); ++i) {
        for (uint8_t flip : {0x01, 0x80, 0xff}) {
            auto bytes = good;
            bytes[i] ^= flip;
            const std::string path = temp_trace_path("flip");
            write_file(path, bytes);
            Collector c;
            try {
                read_trace(path, c);
            } catch (const TraceError&) {
            }
        }
    }
}

// A sampled trace of the Process record, `rec` and the End record, read back.
Collector read_sampled(const format::RecordEncoder& rec, const std::string& name) {
    TraceBuilder b;
    b.process(1, 0, 0, "/usr/bin/python3", "python3").record(rec).end(10000, 10000);
    const std::string path = temp_trace_path(name);
    b.write(path, format::kSampledVersion);
    Collector c;
    read_trace(path, c);
    return c;
}

// CacheMisses (version 4): per cache, the counted misses, their first and last ticks (the
// last as a delta), the entry counts and the inserting stacks with their misses.
TEST(AnalyzerReader, DecodesCacheMissCounts) {
    format::RecordEncoder rec(format::RecordKind::CacheMisses);
    rec.varint(5000).varint(2);
    rec.varint(3).varint(40).varint(38).varint(1000).varint(900).varint(12).varint(128).varint(2);
    rec.varint(7).varint(30).varint(2).varint(10);  // stacks 7 and 9, as steps
    rec.varint(4).varint(1).varint(1).varint(4000).varint(0).varint(0).varint(1).varint(0);
    const Collector c = read_sampled(rec, "cache_misses");
    ASSERT_EQ(c.miss_counts.size(), 1u);
    const CacheMissesRecord& r = c.miss_counts[0];
    EXPECT_EQ(r.ticks, 5000u);
    ASSERT_EQ(r.caches.size(), 2u);
    EXPECT_EQ(r.caches[0].cache_id, 3u);
    EXPECT_EQ(r.caches[0].misses, 40u);
    EXPECT_EQ(r.caches[0].stored, 38u);
    EXPECT_EQ(r.caches[0].first_ticks, 1000u);
    EXPECT_EQ(r.caches[0].last_ticks, 1900u);
    EXPECT_EQ(r.caches[0].first_entries_before, 12u);
    EXPECT_EQ(r.caches[0].last_entries_after, 128u);
    EXPECT_EQ(r.caches[0].stacks, (std::vector<std::pair<uint64_t, uint64_t>>{{7, 30}, {9, 10}}));
    EXPECT_EQ(r.caches[1].cache_id, 4u);
    EXPECT_EQ(r.caches[1].last_ticks, 4000u);
    EXPECT_TRUE(r.caches[1].stacks.empty());
    EXPECT_TRUE(c.unknown_kinds.empty());
}

TEST(AnalyzerReader, CacheMissCountsClaimingMoreCachesThanTheRecordHoldsAreAnError) {
    format::RecordEncoder rec(format::RecordKind::CacheMisses);
    rec.varint(5000).varint(1000).varint(3).varint(40);
    TraceBuilder b;
    b.process(1, 0, 0, "/usr/bin/python3", "python3").record(rec);
    EXPECT_NE(read_error(b.bytes(format::kSampledVersion), "cache_misses_bad").find("cache count exceeds record size"),
              std::string::npos);
}

// ShortLivedSamples (version 6): intervals from first_ticks in steps of 2^shift, stacks and
// sizes as steps, each size with its count.
format::RecordEncoder short_lived_record() {
    format::RecordEncoder rec(format::RecordKind::ShortLivedSamples);
    rec.varint(9000).varint(10).varint(4096).varint(2);  // last, shift, first interval, 2 intervals
    rec.varint(0).varint(2);                             // interval 0: 2 stacks
    rec.varint(7).varint(2).varint(64).varint(3).varint(36).varint(1);  // stack 7: 3 x 64, 1 x 100
    rec.varint(2).varint(1).varint(5000).varint(2);                     // stack 9: 2 x 5000
    rec.varint(3).varint(1).varint(7).varint(1).varint(64).varint(4);    // interval 3: stack 7, 4 x 64
    return rec;
}

TEST(AnalyzerReader, DecodesShortLivedSamples) {
    const Collector c = read_sampled(short_lived_record(), "short_lived");
    ASSERT_EQ(c.short_lived.size(), 1u);
    const ShortLivedSamplesRecord& r = c.short_lived[0];
    EXPECT_EQ(r.last_ticks, 9000u);
    EXPECT_EQ(r.shift, 10u);
    auto as_tuples = [](const std::vector<ShortLivedGroup>& groups) {
        std::vector<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>> out;
        for (const ShortLivedGroup& g : groups) out.emplace_back(g.ticks, g.stack_id, g.size, g.count);
        return out;
    };
    EXPECT_EQ(as_tuples(r.groups), (std::vector<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>>{
                                       {4096, 7, 64, 3}, {4096, 7, 100, 1}, {4096, 9, 5000, 2}, {4096 + 3 * 1024, 7, 64, 4}}));
    EXPECT_TRUE(c.unknown_kinds.empty());
}

TEST(AnalyzerReader, ShortLivedSamplesClaimingMoreThanTheRecordHoldsAreAnError) {
    for (auto [fields, what] : {std::pair{std::vector<uint64_t>{9000, 10, 4096, 1000, 0}, "interval count exceeds"},
                                std::pair{std::vector<uint64_t>{9000, 10, 4096, 1, 0, 1000}, "stack count exceeds"},
                                std::pair{std::vector<uint64_t>{9000, 10, 4096, 1, 0, 1, 7, 900}, "size count exceeds"},
                                std::pair{std::vector<uint64_t>{9000, 64, 4096, 0}, "shift of 64 bits"}}) {
        format::RecordEncoder rec(format::RecordKind::ShortLivedSamples);
        for (uint64_t v : fields) rec.varint(v);
        TraceBuilder b;
        b.process(1, 0, 0).record(rec);
        EXPECT_NE(read_error(b.bytes(format::kSampledVersion), "short_lived_bad").find(what), std::string::npos) << what;
    }
}

// A sampled trace with counted samples, in prefixed blocks: every flip is still reported.
TEST(AnalyzerReader, EveryBitFlipInATraceWithShortLivedSamplesIsAnError) {
    TraceBuilder b = every_kind();
    b.record(short_lived_record());
    expect_every_bit_flip_is_an_error(b.bytes(format::kSampledVersion, format::Codec::ZstdWithPrefix));
}

}  // namespace
}  // namespace growtrace
