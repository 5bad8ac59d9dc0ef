// The trace file on disk: choosing its name, the file header, and compressed blocks. Each
// block goes out in one write so a process killed at any moment leaves whole blocks behind.
// Called only by the writer (and by flushes at exec/exit) with the recursion guard held, so
// zstd's and our own allocations are not traced.
//
// No descriptor stays open between blocks (preload/support/descriptors.h): each write opens the file
// by its absolute path, checks that it is still the file created (device and inode), appends at
// the end of the last whole block and closes it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "format/trace_format.h"

namespace growtrace::preload {

class TraceFile {
public:
    // Creates the trace, never overwriting an existing file. A process started by the user
    // writes `primary`; when that exists it is an image exec'd by a traced process and writes
    // <stem>.exec<N>.gtrace. A forked child writes <stem>.<pid>.gtrace. On failure logs why
    // and returns false.
    enum class Origin { Started, Forked };
    bool open(const char* primary, Origin origin);
    bool is_open() const { return open_; }
    const char* path() const { return path_; }

    // Writes one block of records (compressing it); false if the disk refused it, or the file
    // is gone (was_removed() then says so).
    bool write_block(const uint8_t* records, size_t size);
    // The file was deleted (or replaced by another of that name) while we were writing to it.
    bool was_removed() const { return removed_; }
    void close() { open_ = false; }
    // In a forked child: forget the parent's file without touching it.
    void abandon();

    int last_error() const { return last_errno_; }

    // How blocks are compressed. A full trace writes megabytes a second, so each block is
    // compressed on its own at the cheapest level that still compresses well. A sampled trace
    // writes kilobytes a second, so it affords a higher level and refers back into the block
    // before (codec ZstdWithPrefix): a day's trace stays small for well under 1 % of a core.
    static constexpr int kFullTraceLevel = 2;
    static constexpr int kSampledTraceLevel = 15;

private:
    bool try_create(const char* path);
    // Opens the file to append a block; -1 if it is gone or cannot be opened.
    int open_to_append();
    bool write_all(int fd, const void* data, size_t size);
    // Fills `header` and returns the payload to store: the records, or their zstd frame (then
    // right after a copy of the header in compressed_, for one write).
    const uint8_t* encode_block(const uint8_t* records, size_t size, format::BlockHeader& header);
    bool write_encoded(int fd, const format::BlockHeader& header, const uint8_t* payload);
    // Opens, appends the encoded block, closes: the part of write_block done on the file thread.
    bool append_block(const format::BlockHeader& header, const uint8_t* payload);

    bool open_ = false;
    bool removed_ = false;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
    int last_errno_ = 0;
    uint64_t complete_size_ = 0;  // bytes of the header and of whole blocks on disk
    char path_[4096] = {};        // absolute: the program may change its directory
    // Compresses `size` bytes of records into compressed_ after the header; 0 if zstd failed.
    size_t compress(const uint8_t* records, size_t size, size_t bound, bool with_prefix);
    // The records of the last block on disk, the prefix of the next (sampled traces only).
    void remember_block(const uint8_t* records, size_t size);

    void* zstd_ = nullptr;
    bool sampled_ = false;  // fixed when the file is created, as its version is
    uint8_t* compressed_ = nullptr;
    size_t compressed_capacity_ = 0;
    uint8_t* previous_ = nullptr;
    size_t previous_size_ = 0;
    size_t previous_capacity_ = 0;
};

}  // namespace growtrace::preload
