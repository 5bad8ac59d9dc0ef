#include "analyzer/read/trace_reader.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <sys/stat.h>
#include <zstd.h>

#include "analyzer/read/trace_error.h"
#include "format/checksum.h"

namespace growtrace {

namespace {

uint32_t load_u32_le(const uint8_t* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

thread_local ReadProgressFn t_progress_fn = nullptr;
thread_local void* t_progress_context = nullptr;

}  // namespace

ReadProgressScope::ReadProgressScope(ReadProgressFn fn, void* context)
    : previous_fn_(t_progress_fn), previous_context_(t_progress_context) {
    t_progress_fn = fn;
    t_progress_context = context;
}

ReadProgressScope::~ReadProgressScope() {
    t_progress_fn = previous_fn_;
    t_progress_context = previous_context_;
}

std::string record_kind_name(uint8_t kind) {
    using K = format::RecordKind;
    // Version 2 kinds by value (see record_decoder.h).
    if (kind == 0x08) return "Time";
    if (kind == 0x12) return "AllocCompact";
    if (kind == 0x13) return "FreeCompact";
    switch (static_cast<K>(kind)) {
        default:
            break;
        case K::Process: return "Process";
        case K::Module: return "Module";
        case K::ModulesReset: return "ModulesReset";
        case K::Thread: return "Thread";
        case K::StackNode: return "StackNode";
        case K::PyFrame: return "PyFrame";
        case K::ThreadName: return "ThreadName";
        case K::Alloc: return "Alloc";
        case K::Free: return "Free";
        case K::TimeMark: return "TimeMark";
        case K::End: return "End";
        case K::Fork: return "Fork";
        case K::Exec: return "Exec";
        case K::TracerError: return "TracerError";
        case K::CacheCreate: return "CacheCreate";
        case K::CacheInsert: return "CacheInsert";
        case K::TypeCreate: return "TypeCreate";
        case K::CacheSize: return "CacheSize";
        case K::CacheMisses: return "CacheMisses";
        case K::ShortLivedSamples: return "ShortLivedSamples";
        case K::Collection: return "Collection";
        case K::Container: return "Container";
        case K::Exiting: return "Exiting";
        case K::Sampling: return "Sampling";
        case K::Ledger: return "Ledger";
    }
    return fmt::format("kind 0x{:02x}", kind);
}

std::string describe_position(const RawRecord& rec) {
    return fmt::format("block {} at offset {}, record {} at payload offset {}", rec.block_index,
                       rec.block_offset, record_kind_name(rec.kind), rec.record_offset);
}

TraceReader::TraceReader(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) throw TraceError(fmt::format("cannot open trace {}: {}", path, std::strerror(errno)));
    struct stat st {};
    if (fstat(fileno(file_), &st) != 0 || !S_ISREG(st.st_mode)) {
        std::fclose(file_);
        file_ = nullptr;
        throw TraceError(fmt::format("cannot read trace {}: not a regular file", path));
    }
    file_size_ = static_cast<uint64_t>(st.st_size);
    if (file_size_ == 0) {
        std::fclose(file_);
        file_ = nullptr;
        throw TraceError(fmt::format("trace {} is empty (0 bytes): the traced process wrote nothing", path));
    }

    uint8_t header[sizeof(format::FileHeader)];
    try {
        if (file_size_ < sizeof(header))
            throw TraceError(fmt::format("truncated trace: file header needs {} bytes, file has {}",
                                         sizeof(header), file_size_));
        read_exact(header, sizeof(header));
        if (std::memcmp(header, format::kMagic, sizeof(format::kMagic)) != 0)
            throw TraceError(fmt::format("{} is not a growtrace trace (bad magic at offset 0)", path));
        version_ = load_u32_le(header + 8);
        if (version_ == 0)
            throw TraceError("invalid trace format version 0 at offset 8");
        if (version_ > format::kVersion)
            throw TraceError(fmt::format("trace format version {} is newer than this analyzer supports (max {})",
                                         version_, format::kVersion));
        // From version 3 the flags are known exactly: other bits are damage, not news.
        const uint32_t flags = load_u32_le(header + 12);
        if (version_ >= 3 && flags != format::kKnownFlags)
            throw TraceError(fmt::format("corrupt trace: file header flags 0x{:08x} at offset 12, expected 0x{:08x}",
                                         flags, format::kKnownFlags));
    } catch (...) {
        std::fclose(file_);
        file_ = nullptr;
        throw;
    }
}

TraceReader::~TraceReader() {
    if (file_) std::fclose(file_);
}

void TraceReader::read_exact(void* dst, size_t n) {
    if (n == 0) return;
    if (std::fread(dst, 1, n, file_) != n)
        throw TraceError(fmt::format("I/O error reading {} at offset {}", path_, pos_));
    pos_ += n;
}

void TraceReader::fail_block(const std::string& what) const {
    throw TraceError(fmt::format("corrupt trace: block {} at offset {}: {}", block_.index, block_.offset, what));
}

// Decodes stored_ into raw_, with the previous block's records as the frame's prefix or not.
void TraceReader::decompress(bool with_prefix) {
    if (!dctx_) dctx_ = {ZSTD_createDCtx(), [](void* d) { ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(d)); }};
    auto* dctx = static_cast<ZSTD_DCtx*>(dctx_.get());
    if (!dctx) throw TraceError("out of memory for the zstd decoder");
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_and_parameters);
    if (with_prefix) {
        const size_t r = ZSTD_DCtx_refPrefix(dctx, previous_raw_.data(), previous_raw_.size());
        if (ZSTD_isError(r)) fail_block(fmt::format("zstd error: {}", ZSTD_getErrorName(r)));
    }
    raw_.resize(block_.raw_size);
    // Decompress into exactly raw_size bytes: a frame that decodes to more is an error from zstd
    // ("destination buffer too small"), one that decodes to less is caught below.
    const size_t n = ZSTD_decompressDCtx(dctx, raw_.data(), raw_.size(), stored_.data(), stored_.size());
    if (ZSTD_isError(n)) fail_block(fmt::format("zstd error: {}", ZSTD_getErrorName(n)));
    if (n != block_.raw_size) fail_block(fmt::format("decodes to {} bytes, header says {}", n, block_.raw_size));
}

// Reads and decodes the next block into raw_. Returns false at a clean end of file.
bool TraceReader::load_next_block() {
    if (pos_ == file_size_) return false;
    block_ = BlockInfo{};
    block_.index = blocks_read_;
    block_.offset = pos_;
    const uint64_t left = file_size_ - pos_;
    const uint32_t header_size = format::block_header_size(version_);
    if (left < header_size)
        throw TraceError(fmt::format("truncated trace: block {} at offset {} needs {} bytes of header, file ends after {}",
                                     block_.index, block_.offset, header_size, left));
    uint8_t h[sizeof(format::BlockHeader)];
    read_exact(h, header_size);
    const uint32_t magic = load_u32_le(h);
    block_.codec = h[4];
    block_.stored_size = load_u32_le(h + 8);
    block_.raw_size = load_u32_le(h + 12);
    const bool checksummed = header_size > format::kChecksummedBytes;
    if (magic != format::kBlockMagic) fail_block(fmt::format("bad block magic 0x{:08x}", magic));
    if (block_.stored_size > format::kMaxBlockSize || block_.raw_size > format::kMaxBlockSize)
        fail_block(fmt::format("block sizes stored={} raw={} exceed the maximum {}", block_.stored_size,
                               block_.raw_size, format::kMaxBlockSize));
    const uint64_t payload_left = file_size_ - pos_;
    if (block_.stored_size > payload_left)
        throw TraceError(fmt::format("truncated trace: block {} at offset {} needs {} bytes, file ends after {}{}",
                                     block_.index, block_.offset, block_.stored_size, payload_left,
                                     checksummed ? " (or its header is damaged)" : ""));

    const auto codec = static_cast<format::Codec>(block_.codec);
    raw_.swap(previous_raw_);  // the last block's records stay readable as this one's prefix
    std::vector<uint8_t>& stored = codec == format::Codec::Raw ? raw_ : stored_;
    stored.resize(block_.stored_size);
    read_exact(stored.data(), stored.size());
    if (checksummed) {
        const uint32_t expected = load_u32_le(h + format::kChecksummedBytes);
        const uint32_t actual =
            format::crc32c_update(format::crc32c(h, format::kChecksummedBytes), stored.data(), stored.size());
        if (actual != expected)
            fail_block(fmt::format("checksum mismatch (header says 0x{:08x}, the {} bytes give 0x{:08x}): the "
                                   "block was damaged after it was written",
                                   expected, header_size + stored.size(), actual));
    }
    switch (codec) {
        case format::Codec::Raw:
            if (block_.stored_size != block_.raw_size)
                fail_block(fmt::format("raw block stores {} bytes but declares {} decoded bytes",
                                       block_.stored_size, block_.raw_size));
            break;
        case format::Codec::Zstd:
            decompress(false);
            break;
        case format::Codec::ZstdWithPrefix:
            if (version_ < format::kFirstPrefixVersion)
                fail_block(fmt::format("codec {} is not used before format version {}", block_.codec,
                                       format::kFirstPrefixVersion));
            if (blocks_read_ == 0) fail_block("the first block refers to a block before it");
            decompress(true);
            break;
        default:
            fail_block(fmt::format("unknown codec {}", block_.codec));
    }
    ++blocks_read_;
    cursor_ = format::Cursor(raw_.data(), raw_.data() + raw_.size());
    if (t_progress_fn) t_progress_fn(pos_, file_size_, t_progress_context);
    return true;
}

bool TraceReader::next(RawRecord& out) {
    first_in_block_ = false;
    while (cursor_.at_end()) {
        if (!load_next_block()) return false;
        first_in_block_ = true;
    }
    out = RawRecord{};
    out.block_index = block_.index;
    out.block_offset = block_.offset;
    out.record_offset = cursor_.offset();
    uint64_t len = 0;
    if (!cursor_.byte(out.kind) || !cursor_.varint(len))
        fail_block(fmt::format("record at payload offset {}: malformed record header", out.record_offset));
    if (len > cursor_.remaining())
        fail_block(fmt::format("record {} at payload offset {}: length {} runs past the block end ({} bytes left)",
                               record_kind_name(out.kind), out.record_offset, len, cursor_.remaining()));
    out.data = cursor_.position();
    out.size = static_cast<size_t>(len);
    cursor_.skip(out.size);
    return true;
}

}  // namespace growtrace
