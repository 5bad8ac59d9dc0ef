// Reads the container layer of a trace file: file header, blocks, and the length-prefixed
// records inside each block. It does not interpret record payloads (record_decoder.h does);
// the dumper uses it directly to show every record with its position.
//
// Everything read from the file is untrusted: sizes are checked against the file size and
// kMaxBlockSize before anything is allocated, and all parsing goes through format::Cursor.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <memory>
#include <vector>

#include "format/trace_format.h"
#include "format/varint.h"

namespace growtrace {

struct BlockInfo {
    uint64_t index = 0;   // 0-based block number
    uint64_t offset = 0;  // file offset of the block header
    uint8_t codec = 0;
    uint32_t stored_size = 0;
    uint32_t raw_size = 0;
};

// One record as stored. data/size is the payload; it stays valid until the next call to next().
struct RawRecord {
    uint8_t kind = 0;
    const uint8_t* data = nullptr;
    size_t size = 0;
    uint64_t block_index = 0;
    uint64_t block_offset = 0;   // file offset of the containing block's header
    uint64_t record_offset = 0;  // offset of the kind byte within the decoded block payload
};

// Human-readable name of a record kind ("Alloc", "kind 0x7f" for unknown ones).
std::string record_kind_name(uint8_t kind);

// "block 3 at offset 4096, record Alloc at payload offset 120" — used in error messages.
std::string describe_position(const RawRecord& rec);

// Reading progress, for a progress display: while a ReadProgressScope lives, every TraceReader
// on this thread calls `fn(offset reached, file size, context)` after loading each block.
using ReadProgressFn = void (*)(uint64_t offset, uint64_t file_size, void* context);
class ReadProgressScope {
public:
    ReadProgressScope(ReadProgressFn fn, void* context);
    ~ReadProgressScope();
    ReadProgressScope(const ReadProgressScope&) = delete;
    ReadProgressScope& operator=(const ReadProgressScope&) = delete;

private:
    ReadProgressFn previous_fn_;
    void* previous_context_;
};

class TraceReader {
public:
    // Opens the file and validates the file header. Throws TraceError.
    explicit TraceReader(const std::string& path);
    ~TraceReader();
    TraceReader(const TraceReader&) = delete;
    TraceReader& operator=(const TraceReader&) = delete;

    uint32_t version() const { return version_; }
    uint64_t file_size() const { return file_size_; }
    const std::string& path() const { return path_; }

    // Reads the next record. Returns false when the file ends exactly at a block boundary
    // (with or without an End record: that is the decoder's business). Throws TraceError on
    // truncation or corruption.
    bool next(RawRecord& out);

    // The block the last record came from, and whether that record was the block's first.
    const BlockInfo& block() const { return block_; }
    bool first_in_block() const { return first_in_block_; }
    uint64_t blocks_read() const { return blocks_read_; }

private:
    bool load_next_block();
    void decompress(bool with_prefix);
    void read_exact(void* dst, size_t n);
    [[noreturn]] void fail_block(const std::string& what) const;

    std::string path_;
    std::FILE* file_ = nullptr;
    uint64_t file_size_ = 0;
    uint64_t pos_ = 0;  // file offset of the next unread byte
    uint32_t version_ = 0;

    BlockInfo block_;
    uint64_t blocks_read_ = 0;
    bool first_in_block_ = false;
    std::vector<uint8_t> stored_;
    std::vector<uint8_t> raw_;
    std::vector<uint8_t> previous_raw_;  // the block before: a ZstdWithPrefix block's prefix
    std::unique_ptr<void, void (*)(void*)> dctx_{nullptr, nullptr};
    format::Cursor cursor_{nullptr, nullptr};
};

}  // namespace growtrace
