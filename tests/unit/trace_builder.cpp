#include "trace_builder.h"

#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "format/checksum.h"

namespace growtrace::testing {

namespace {

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

TraceBuilder& TraceBuilder::record(const format::RecordEncoder& rec) {
    const size_t at = current_.size();
    current_.resize(at + rec.size());
    rec.finish(current_.data() + at);
    return *this;
}

TraceBuilder& TraceBuilder::raw_record(uint8_t kind, const std::vector<uint8_t>& payload) {
    current_.push_back(kind);
    uint8_t len[format::kMaxVarintBytes];
    uint8_t* end = format::put_varint(len, payload.size());
    current_.insert(current_.end(), len, end);
    current_.insert(current_.end(), payload.begin(), payload.end());
    return *this;
}

namespace {

format::Bytes bytes_of(const std::string& s) { return format::Bytes(s.data(), s.size()); }

}  // namespace

TraceBuilder& TraceBuilder::process(uint64_t pid, uint64_t start_ticks, uint64_t start_ns,
                                    const std::string& exe, const std::string& cmdline) {
    format::records::Process r;
    r.pid = pid;
    r.ppid = 1;
    r.start_ticks = start_ticks;
    r.start_monotonic_ns = start_ns;
    r.start_realtime_ns = 1700000000000000000ull;
    r.exe = bytes_of(exe);
    r.cmdline = bytes_of(cmdline);
    return put(r);
}

TraceBuilder& TraceBuilder::module(uint64_t base, const std::string& path, const std::string& build_id,
                                   const std::vector<std::pair<uint64_t, uint64_t>>& segments) {
    std::vector<format::records::Segment> listed;
    for (auto [start, size] : segments) listed.push_back({start, size});
    format::records::Module r;
    r.base = base;
    r.path = bytes_of(path);
    r.build_id = bytes_of(build_id);
    r.segments = format::List<format::records::Segment>::of(listed.data(), listed.size());
    return put(r);
}

TraceBuilder& TraceBuilder::modules_reset(uint64_t ticks) { return put(format::records::ModulesReset{ticks}); }

TraceBuilder& TraceBuilder::thread(uint64_t tid, uint64_t base_ticks) {
    run_ticks_ = base_ticks;
    run_addr_ = 0;
    return put(format::records::Thread{tid, base_ticks});
}

TraceBuilder& TraceBuilder::stack_node(uint64_t id, uint64_t parent, uint64_t ip) {
    return put(format::records::StackNode{id, parent, ip});
}

TraceBuilder& TraceBuilder::py_frame(uint64_t id, const std::string& file, const std::string& function,
                                     uint64_t line) {
    return put(format::records::PyFrame{id, bytes_of(file), bytes_of(function), line});
}

TraceBuilder& TraceBuilder::thread_name(uint64_t tid, const std::string& name) {
    return put(format::records::ThreadName{tid, bytes_of(name)});
}

// Ticks and addresses of a run's events are deltas from the run's previous event.
TraceBuilder& TraceBuilder::alloc(uint64_t ticks, uint64_t size, uint64_t addr, uint64_t stack_id) {
    format::records::Alloc r{static_cast<int64_t>(ticks - run_ticks_), size, static_cast<int64_t>(addr - run_addr_),
                             stack_id};
    run_ticks_ = ticks;
    run_addr_ = addr;
    return put(r);
}

TraceBuilder& TraceBuilder::free(uint64_t ticks, uint64_t addr) {
    format::records::Free r{static_cast<int64_t>(ticks - run_ticks_), static_cast<int64_t>(addr - run_addr_)};
    run_ticks_ = ticks;
    run_addr_ = addr;
    return put(r);
}

TraceBuilder& TraceBuilder::time_mark(uint64_t ticks, uint64_t ns, uint64_t rss) {
    return put(format::records::TimeMark{ticks, ns, rss});
}

TraceBuilder& TraceBuilder::end(uint64_t ticks, uint64_t ns) { return put(format::records::End{ticks, ns}); }

TraceBuilder& TraceBuilder::fork(uint64_t child_pid, const std::string& path) {
    return put(format::records::Fork{child_pid, bytes_of(path)});
}

TraceBuilder& TraceBuilder::exec(const std::string& path) { return put(format::records::Exec{bytes_of(path)}); }

TraceBuilder& TraceBuilder::tracer_error(uint64_t ticks, const std::string& message) {
    return put(format::records::TracerError{ticks, bytes_of(message)});
}

TraceBuilder& TraceBuilder::end_block(format::Codec codec) {
    if (current_.empty()) return *this;
    std::vector<uint8_t> stored;
    // The first block has no block before it to refer to: it is compressed on its own.
    if (codec == format::Codec::ZstdWithPrefix && blocks_.empty()) codec = format::Codec::Zstd;
    if (codec != format::Codec::Raw) {
        std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
        ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, 3);
        if (codec == format::Codec::ZstdWithPrefix)
            ZSTD_CCtx_refPrefix(cctx.get(), previous_raw_.data(), previous_raw_.size());
        stored.resize(ZSTD_compressBound(current_.size()));
        size_t n = ZSTD_compress2(cctx.get(), stored.data(), stored.size(), current_.data(), current_.size());
        if (ZSTD_isError(n)) throw std::runtime_error("zstd compression failed");
        stored.resize(n);
    } else {
        stored = current_;
    }
    blocks_.push_back(Block{codec, std::move(stored), static_cast<uint32_t>(current_.size())});
    previous_raw_ = current_;
    current_.clear();
    return *this;
}

std::vector<uint8_t> TraceBuilder::bytes(uint32_t version, format::Codec codec) {
    end_block(codec);
    std::vector<uint8_t> out(format::kMagic, format::kMagic + 8);
    put_u32(out, version);
    put_u32(out, version >= 3 ? format::kKnownFlags : 0);
    for (const Block& block : blocks_) {
        const size_t header_at = out.size();
        put_u32(out, format::kBlockMagic);
        out.push_back(static_cast<uint8_t>(block.codec));
        out.insert(out.end(), 3, 0);
        put_u32(out, static_cast<uint32_t>(block.stored.size()));
        put_u32(out, block.raw_size);
        if (version >= 3)
            put_u32(out, format::crc32c_update(format::crc32c(out.data() + header_at, format::kChecksummedBytes),
                                               block.stored.data(), block.stored.size()));
        out.insert(out.end(), block.stored.begin(), block.stored.end());
    }
    return out;
}

size_t TraceBuilder::size_so_far() const {
    size_t size = sizeof(format::FileHeader);
    for (const Block& block : blocks_) size += format::block_header_size(format::kVersion) + block.stored.size();
    return size;
}

void TraceBuilder::write(const std::string& path, uint32_t version, format::Codec codec) {
    write_file(path, bytes(version, codec));
}

std::string temp_trace_path(const std::string& name) {
    const char* dir = std::getenv("TEST_TMPDIR");
    std::string base = dir && *dir ? dir : "/tmp";
    return base + "/growtrace_test_" + std::to_string(getpid()) + "_" + name + ".gtrace";
}

void write_file(const std::string& path, const std::vector<uint8_t>& data) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + path);
    if (!data.empty()) std::fwrite(data.data(), 1, data.size(), f);
    std::fclose(f);
}

}  // namespace growtrace::testing
