#include "preload/write/trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "contracts/trace_names.h"
#include "format/checksum.h"
#include "format/trace_format.h"
#include "preload/support/descriptors.h"
#include "preload/support/file_thread.h"
#include "preload/support/log.h"
#include "preload/record/sampler.h"

namespace growtrace::preload {

bool TraceFile::try_create(const char* path) {
    last_errno_ = 0;
    char absolute[sizeof path_];
    if (path[0] == '/') {
        snprintf(absolute, sizeof absolute, "%s", path);
    } else {
        char cwd[sizeof path_];
        if (!getcwd(cwd, sizeof cwd)) {
            last_errno_ = errno;
            return false;
        }
        int n = snprintf(absolute, sizeof absolute, "%s/%s", cwd, path);
        if (n < 0 || static_cast<size_t>(n) >= sizeof absolute) {
            last_errno_ = ENAMETOOLONG;
            return false;
        }
    }
    int fd = open_for_tracer(absolute, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        last_errno_ = errno;
        return false;
    }
    struct stat st;
    format::FileHeader header{};
    memcpy(header.magic, format::kMagic, sizeof header.magic);
    // Only a sampled trace may hold what version 4 added (CacheMisses): a full one stays
    // readable by analyzers that know version 3.
    sampled_ = sampling_enabled();
    previous_size_ = 0;
    header.version = sampled_ ? format::kSampledVersion : format::kFullVersion;
    header.flags = format::kFlagBlockChecksums;
    bool written = fstat(fd, &st) == 0 && write_all(fd, &header, sizeof header);
    if (!written && !last_errno_) last_errno_ = errno;
    ::close(fd);
    snprintf(path_, sizeof path_, "%s", absolute);
    if (!written) {
        unlink(path_);
        return false;
    }
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    complete_size_ = sizeof header;
    removed_ = false;
    open_ = true;
    return true;
}

int TraceFile::open_to_append() {
    int fd = open_for_tracer(path_, O_WRONLY);
    struct stat st;
    if (fd < 0 && errno == ENOENT) {
        removed_ = true;
    } else if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_)) {
        removed_ = true;  // another file took its name
        ::close(fd);
        fd = -1;
    }
    if (fd < 0) {
        last_errno_ = removed_ ? ENOENT : errno;
        return -1;
    }
    if (lseek(fd, static_cast<off_t>(complete_size_), SEEK_SET) < 0) {
        last_errno_ = errno;
        ::close(fd);
        return -1;
    }
    return fd;
}

bool TraceFile::open(const char* primary, Origin origin) {
    bool created = origin == Origin::Started && try_create(primary);
    int first_errno = last_errno_;
    char candidate[sizeof path_];
    for (int n = 1; !created && n < 1000; ++n) {
        bool named = origin == Origin::Started
                         ? trace_names::exec_image(primary, n, candidate, sizeof candidate)
                         : trace_names::forked_child(primary, static_cast<int>(getpid()), n, candidate, sizeof candidate);
        if (!named) break;
        created = try_create(candidate);
        if (!created && last_errno_ != EEXIST) break;
    }
    if (!created) {
        int err = (first_errno && first_errno != EEXIST) ? first_errno : last_errno_;
        log_line("cannot write trace to %s: %s; the program runs untraced", primary, strerror(err));
        return false;
    }
    return true;
}

bool TraceFile::write_all(int fd, const void* data, size_t size) {
    auto* p = static_cast<const uint8_t*>(data);
    while (size > 0) {
        ssize_t n = ::write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            last_errno_ = n < 0 ? errno : ENOSPC;
            return false;
        }
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

bool TraceFile::write_block(const uint8_t* records, size_t size) {
    if (!open_ || size == 0) return open_;
    // Compressed and checksummed first: the descriptor is open for the write alone, and on the
    // file thread (file_thread.h), out of the program's table.
    struct Append {
        TraceFile* file;
        format::BlockHeader header;
        const uint8_t* payload;
    } append{this, {}, nullptr};
    append.payload = encode_block(records, size, append.header);
    bool written = on_file_thread(
        [](void* a) {
            auto* block = static_cast<Append*>(a);
            return int(block->file->append_block(block->header, block->payload));
        },
        &append);
    if (written) {
        complete_size_ += sizeof append.header + append.header.stored_size;
        remember_block(records, size);  // only a block on disk can be the next one's prefix
    }
    return written;
}

bool TraceFile::append_block(const format::BlockHeader& header, const uint8_t* payload) {
    int fd = open_to_append();
    if (fd < 0) return false;
    bool written = write_encoded(fd, header, payload);
    // The disk took part of the block (full, quota): cut the file back to the previous block
    // boundary, so what was written stays a readable trace ending at a whole block.
    if (!written) {
        int saved = last_errno_;
        if (ftruncate(fd, static_cast<off_t>(complete_size_)) != 0) {}
        last_errno_ = saved;
    }
    ::close(fd);
    return written;
}

const uint8_t* TraceFile::encode_block(const uint8_t* records, size_t size, format::BlockHeader& header) {
    if (!zstd_) zstd_ = ZSTD_createCCtx();
    size_t bound = ZSTD_compressBound(size);
    if (bound > compressed_capacity_) {
        free(compressed_);
        compressed_ = static_cast<uint8_t*>(malloc(bound + sizeof(format::BlockHeader)));
        compressed_capacity_ = compressed_ ? bound : 0;
    }
    header.magic = format::kBlockMagic;
    header.raw_size = static_cast<uint32_t>(size);
    const uint8_t* payload = records;
    size_t stored = size;
    header.codec = static_cast<uint8_t>(format::Codec::Raw);
    if (zstd_ && compressed_) {
        const bool with_prefix = sampled_ && previous_size_ > 0;
        size_t n = compress(records, size, bound, with_prefix);
        if (n > 0 && n < size) {
            header.codec = static_cast<uint8_t>(with_prefix ? format::Codec::ZstdWithPrefix : format::Codec::Zstd);
            payload = compressed_ + sizeof header;
            stored = n;
        }
    }
    header.stored_size = static_cast<uint32_t>(stored);
    header.checksum = format::crc32c_update(format::crc32c(&header, format::kChecksummedBytes), payload, stored);
    if (payload != records) memcpy(compressed_, &header, sizeof header);
    return payload;
}

size_t TraceFile::compress(const uint8_t* records, size_t size, size_t bound, bool with_prefix) {
    auto* cctx = static_cast<ZSTD_CCtx*>(zstd_);
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    // Full traces, level 2: on compact records it is 40 % smaller than level 1, while level 3
    // (another 20 % smaller) costs the writer enough CPU to slow a 2-core machine's program down.
    // Sampled traces, level 15 with the previous block as prefix: 26 % smaller than level 2
    // alone on the openai reproduction's 100 KB blocks, for about 35 ms of CPU a block
    // (docs/trace-format.md, "Block").
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, sampled_ ? kSampledTraceLevel : kFullTraceLevel);
    if (with_prefix && ZSTD_isError(ZSTD_CCtx_refPrefix(cctx, previous_, previous_size_))) return 0;
    size_t n = ZSTD_compress2(cctx, compressed_ + sizeof(format::BlockHeader), bound, records, size);
    return ZSTD_isError(n) ? 0 : n;
}

void TraceFile::remember_block(const uint8_t* records, size_t size) {
    if (!sampled_) return;
    if (size > previous_capacity_) {
        free(previous_);
        previous_ = static_cast<uint8_t*>(malloc(size));
        previous_capacity_ = previous_ ? size : 0;
    }
    // Without room for it the next block is compressed on its own (codec Zstd), still readable.
    previous_size_ = previous_ ? size : 0;
    if (previous_) memcpy(previous_, records, size);
}

bool TraceFile::write_encoded(int fd, const format::BlockHeader& header, const uint8_t* payload) {
    size_t stored = header.stored_size;
    // Header and payload in one write() so a SIGKILL leaves no half block.
    if (payload == compressed_ + sizeof header) return write_all(fd, compressed_, sizeof header + stored);
    iovec parts[2] = {{const_cast<format::BlockHeader*>(&header), sizeof header}, {const_cast<uint8_t*>(payload), stored}};
    ssize_t n = writev(fd, parts, 2);
    if (n == static_cast<ssize_t>(sizeof header + stored)) return true;
    if (n < 0) {
        last_errno_ = errno;
        return false;
    }
    // A short write: finish it piece by piece.
    size_t done = static_cast<size_t>(n);
    if (done < sizeof header &&
        !write_all(fd, reinterpret_cast<const uint8_t*>(&header) + done, sizeof header - done))
        return false;
    size_t payload_done = done > sizeof header ? done - sizeof header : 0;
    return write_all(fd, payload + payload_done, stored - payload_done);
}

void TraceFile::abandon() {
    open_ = false;
    previous_size_ = 0;
    path_[0] = '\0';
}

}  // namespace growtrace::preload
