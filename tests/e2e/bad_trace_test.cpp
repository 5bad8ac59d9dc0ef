// Bad input to `analyze` and `dump`: exit status 2, one "growtrace: error:" line that says
// what is wrong and where, and never a crash. The damaged files are built byte by byte from
// format/trace_format.h, plus one real trace cut in the middle of a block.
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "e2e_support.h"
#include "format/trace_format.h"

namespace growtrace::e2e {
namespace {

namespace format = growtrace::format;

std::string file_header(uint32_t version = format::kVersion) {
    format::FileHeader header{};
    memcpy(header.magic, format::kMagic, sizeof header.magic);
    header.version = version;
    header.flags = version >= 3 ? format::kKnownFlags : 0;
    return std::string(reinterpret_cast<const char*>(&header), sizeof header);
}

std::string block_header(uint32_t magic, uint32_t stored_size, uint32_t raw_size) {
    format::BlockHeader header{};
    header.magic = magic;
    header.codec = static_cast<uint8_t>(format::Codec::Raw);
    header.stored_size = stored_size;
    header.raw_size = raw_size;
    return std::string(reinterpret_cast<const char*>(&header), sizeof header);
}

// Both verbs must refuse `path` with exit 2 and a single error line containing `needle`.
void expect_refused(const std::string& path, const std::string& needle) {
    for (const char* verb : {"analyze", "dump"}) {
        SCOPED_TRACE(std::string(verb) + " " + path);
        std::vector<std::string> args{verb, path};
        if (std::string(verb) == "analyze") args.push_back("--json");
        ProcessResult r = growtrace(args);
        EXPECT_EQ(r.signal, 0) << "crashed: " << r.err;
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_TRUE(r.err.starts_with("growtrace: error: ")) << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "expected one line: " << r.err;
    }
}

TEST(BadTrace, MissingFile) {
    ScratchDir dir;
    expect_refused(dir / "does-not-exist.gtrace", "does-not-exist.gtrace");
}

TEST(BadTrace, ZeroLengthFile) {
    ScratchDir dir;
    std::string path = dir / "empty.gtrace";
    write_file(path, "");
    expect_refused(path, "empty.gtrace");
}

TEST(BadTrace, NotATrace) {
    ScratchDir dir;
    std::string path = dir / "text.gtrace";
    write_file(path, "this is not a growtrace trace, just some text\n");
    expect_refused(path, "text.gtrace");
}

TEST(BadTrace, NewerVersion) {
    ScratchDir dir;
    std::string path = dir / "future.gtrace";
    write_file(path, file_header(format::kVersion + 41));
    expect_refused(path, std::to_string(format::kVersion + 41));
}

// A process that ended (or exec'd, or was killed) before the first flush leaves only the file
// header: no report about "pid 0" and an empty command, but a warning saying what happened.
TEST(BadTrace, HeaderOnly) {
    ScratchDir dir;
    std::string path = dir / "header-only.gtrace";
    write_file(path, file_header());
    ProcessResult r = growtrace({"analyze", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "warning: trace holds no records, only its 16-byte file header: the process ended, exec'd or was "
                     "killed (or the disk filled) before the tracer's first flush; there is nothing to analyse\n"
                     "nothing to report: the trace names no process and holds no allocation (see the warning above)\n");
}

TEST(BadTrace, TruncatedHeaderAndBlock) {
    ScratchDir dir;
    std::string header_cut = dir / "header-cut.gtrace";
    write_file(header_cut, file_header().substr(0, 10));
    expect_refused(header_cut, "file header");

    // The block announces 100 bytes of payload; only 5 follow. The block starts at offset 16.
    std::string block_cut = dir / "block-cut.gtrace";
    write_file(block_cut, file_header() + block_header(format::kBlockMagic, 100, 100) + "\x01\x02\x03\x04\x05");
    expect_refused(block_cut, "offset 16");
}

TEST(BadTrace, CorruptBlock) {
    ScratchDir dir;
    std::string bad_magic = dir / "bad-magic.gtrace";
    write_file(bad_magic, file_header() + block_header(0xdeadbeef, 4, 4) + "abcd");
    expect_refused(bad_magic, "offset 16");

    // A size far above kMaxBlockSize must be refused before anything is allocated.
    std::string huge = dir / "huge.gtrace";
    write_file(huge, file_header() + block_header(format::kBlockMagic, 0xfffffff0u, 0xfffffff0u) + "abcd");
    expect_refused(huge, "offset 16");

    // A record whose length runs past the end of its block.
    std::string record = std::string("\x10", 1) + "\x7f" + "xy";
    std::string overrun = dir / "record-overrun.gtrace";
    write_file(overrun, file_header() +
                            block_header(format::kBlockMagic, static_cast<uint32_t>(record.size()),
                                         static_cast<uint32_t>(record.size())) +
                            record);
    expect_refused(overrun, "offset");
}

TEST(BadTrace, RealTraceCutInTheMiddleOfABlock) {
    ScratchDir dir;
    std::string trace = dir / "whole.gtrace";
    trace_program(dir, trace, {GT_PROGRAM_MEMO_TABLE, "200", "0"});
    std::string bytes = read_file(trace);
    ASSERT_GT(bytes.size(), 64u);

    // Walk the blocks and cut the last one in half.
    size_t offset = sizeof(format::FileHeader);
    size_t last_block = 0;
    while (offset + sizeof(format::BlockHeader) <= bytes.size()) {
        format::BlockHeader header;
        memcpy(&header, bytes.data() + offset, sizeof header);
        ASSERT_EQ(header.magic, format::kBlockMagic) << "at offset " << offset;
        last_block = offset;
        offset += sizeof header + header.stored_size;
    }
    ASSERT_EQ(offset, bytes.size()) << "the complete trace does not end at a block boundary";
    size_t cut = last_block + (bytes.size() - last_block) / 2;
    std::string truncated = dir / "truncated.gtrace";
    write_file(truncated, bytes.substr(0, cut));
    expect_refused(truncated, "offset " + std::to_string(last_block));
}

// Flipping 1 to 3 bits anywhere in a trace (file header; each block's header fields, checksum
// and payload, raw and zstd blocks alike) is never read as a normal trace: exit 2 with an error
// line naming the offset, or (where the rest can be trusted) a warning in the report.
TEST(BadTrace, BitFlipsAreNeverReadSilently) {
    ScratchDir dir;
    std::string trace = dir / "whole.gtrace";
    trace_program(dir, trace, {GT_STRESS, "pthread-exit"});  // idle ticks give raw blocks too
    const std::string good = read_file(trace);

    std::vector<std::pair<size_t, std::string>> positions = {
        {0, "file magic"}, {8, "file version"}, {12, "file flags"}};
    std::set<int> codecs;
    size_t offset = sizeof(format::FileHeader);
    while (offset < good.size()) {
        format::BlockHeader header;
        ASSERT_LE(offset + sizeof header, good.size());
        memcpy(&header, good.data() + offset, sizeof header);
        ASSERT_EQ(header.magic, format::kBlockMagic) << "at offset " << offset;
        codecs.insert(header.codec);
        std::string block = fmt::format("block at {} ({})", offset, header.codec ? "zstd" : "raw");
        for (auto [at, field] : std::vector<std::pair<size_t, const char*>>{
                 {0, "magic"}, {4, "codec"}, {5, "reserved"}, {8, "stored_size"}, {12, "raw_size"}, {16, "checksum"}})
            positions.push_back({offset + at, block + " " + field});
        size_t payload = offset + sizeof header;
        for (size_t at : {size_t{0}, size_t{header.stored_size / 2}, size_t{header.stored_size - 1}})
            positions.push_back({payload + at, block + " payload +" + std::to_string(at)});
        offset = payload + header.stored_size;
    }
    ASSERT_EQ(offset, good.size());
    EXPECT_EQ(codecs, (std::set<int>{0, 1})) << "the trace should hold raw and zstd blocks";

    std::string damaged = dir / "damaged.gtrace";
    int errors = 0, warnings = 0;
    for (size_t i = 0; i < positions.size(); ++i) {
        auto [at, what] = positions[i];
        std::string bytes = good;
        int flips = 1 + static_cast<int>(i % 3);  // 1, 2 or 3 bits, in the same and the next byte
        for (int f = 0; f < flips; ++f) {
            size_t byte = std::min(at + static_cast<size_t>(f / 2), bytes.size() - 1);
            bytes[byte] = static_cast<char>(bytes[byte] ^ (1 << ((3 * f + static_cast<int>(i)) % 8)));
        }
        write_file(damaged, bytes);
        for (const char* verb : {"analyze", "dump"}) {
            SCOPED_TRACE(fmt::format("{} with {} bit(s) flipped at offset {}: {}", verb, flips, at, what));
            ProcessResult r = growtrace({verb, damaged});
            EXPECT_EQ(r.signal, 0) << r.err;
            if (r.exit_code == 2) {
                ++errors;
                EXPECT_TRUE(r.err.starts_with("growtrace: error: ")) << r.err;
                EXPECT_TRUE(r.err.find("offset") != std::string::npos || r.err.find("version") != std::string::npos)
                    << r.err;
            } else {
                ++warnings;
                EXPECT_EQ(r.exit_code, 0) << r.err;
                EXPECT_NE((r.out + r.err).find("warning"), std::string::npos) << "read without a word";
            }
        }
    }
    RecordProperty("errors", errors);
    RecordProperty("warnings", warnings);
}

}  // namespace
}  // namespace growtrace::e2e
