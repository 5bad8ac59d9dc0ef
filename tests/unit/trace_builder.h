// Builds synthetic trace files for tests: a file header followed by blocks of records encoded
// through their definitions (format/records.h), each block raw or zstd-compressed, in the layout of the version
// asked for (block checksums from version 3). Event helpers take absolute
// ticks and addresses and write the per-run deltas the format uses.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "format/record_codec.h"
#include "format/record_encoder.h"
#include "format/records.h"
#include "format/trace_format.h"

namespace growtrace::testing {

class TraceBuilder {
public:
    // Appends an encoded record to the current block.
    TraceBuilder& record(const format::RecordEncoder& rec);
    // Appends a record of any kind, as its definition encodes it (deltas, ages and steps as
    // given: the helpers below work them out from absolute values).
    template <class R>
    TraceBuilder& put(const R& r) {
        format::RecordEncoder rec(R::kKind);
        return record(format::encode(rec, r));
    }
    // Appends a record with an arbitrary kind byte and payload (unknown kinds, bad payloads).
    TraceBuilder& raw_record(uint8_t kind, const std::vector<uint8_t>& payload);

    TraceBuilder& process(uint64_t pid, uint64_t start_ticks, uint64_t start_ns,
                          const std::string& exe = "/bin/test", const std::string& cmdline = "test");
    TraceBuilder& module(uint64_t base, const std::string& path, const std::string& build_id,
                         const std::vector<std::pair<uint64_t, uint64_t>>& segments);
    TraceBuilder& modules_reset(uint64_t ticks);
    // Starts a thread run: following events' deltas start at base_ticks and address 0.
    TraceBuilder& thread(uint64_t tid, uint64_t base_ticks);
    TraceBuilder& stack_node(uint64_t id, uint64_t parent, uint64_t ip);
    TraceBuilder& py_frame(uint64_t id, const std::string& file, const std::string& function, uint64_t line);
    TraceBuilder& thread_name(uint64_t tid, const std::string& name);
    TraceBuilder& alloc(uint64_t ticks, uint64_t size, uint64_t addr, uint64_t stack_id);
    TraceBuilder& free(uint64_t ticks, uint64_t addr);
    TraceBuilder& time_mark(uint64_t ticks, uint64_t ns, uint64_t rss);
    TraceBuilder& end(uint64_t ticks, uint64_t ns);
    TraceBuilder& fork(uint64_t child_pid, const std::string& path);
    TraceBuilder& exec(const std::string& path);
    TraceBuilder& tracer_error(uint64_t ticks, const std::string& message);

    // Closes the current block (no-op if it is empty).
    TraceBuilder& end_block(format::Codec codec = format::Codec::Raw);

    // Header + all blocks; an open block is closed with `codec` first.
    std::vector<uint8_t> bytes(uint32_t version = format::kVersion,
                               format::Codec codec = format::Codec::Raw);
    // Writes bytes() to path.
    void write(const std::string& path, uint32_t version = format::kVersion,
               format::Codec codec = format::Codec::Raw);

    // File offset at which the next block would start in a file of the current version.
    size_t size_so_far() const;

private:
    struct Block {
        format::Codec codec;
        std::vector<uint8_t> stored;
        uint32_t raw_size;
    };
    std::vector<uint8_t> current_;
    std::vector<uint8_t> previous_raw_;  // the last block's records: a ZstdWithPrefix block's prefix
    std::vector<Block> blocks_;
    uint64_t run_ticks_ = 0;
    uint64_t run_addr_ = 0;
};

// A fresh path under the test temp dir ($TEST_TMPDIR or /tmp), unique per process and name.
std::string temp_trace_path(const std::string& name);

// Writes arbitrary bytes to a file.
void write_file(const std::string& path, const std::vector<uint8_t>& data);

}  // namespace growtrace::testing
