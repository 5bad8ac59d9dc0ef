#include "preload/trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "format/checksum.h"
#include "format/trace_format.h"
#include "preload/log.h"
#include "preload/sampler.h"

namespace growtrace::preload {

bool derived_trace_path(const char* primary, const char* suffix, char* out, size_t out_size) {
    size_t len = strlen(primary);
    static constexpr char kExt[] = ".gtrace";
    size_t ext = sizeof kExt - 1;
    if (len >= ext && strcmp(primary + len - ext, kExt) == 0) len -= ext;
    int n = snprintf(out, out_size, "%.*s%s", static_cast<int>(len), primary, suffix);
    return n > 0 && static_cast<size_t>(n) < out_size;
}

bool TraceFile::try_create(const char* path) {
    if (!file_.open(path, O_WRONLY | O_CREAT | O_EXCL, 0644)) {
        last_errno_ = errno;
        return false;
    }
    snprintf(path_, sizeof path_, "%s", path);
    return true;
}

int TraceFile::usable_fd() {
    int fd = file_.get();
    if (fd >= 0 || !file_.is_open()) return fd;
    OwnFd again;
    if (!again.open(path_, O_WRONLY)) {
        last_errno_ = errno;
        file_.close();
        return -1;
    }
    if (!again.same_file(file_)) {  // replaced by another file of that name
        again.close();
        file_.close();
        last_errno_ = EBADF;
        return -1;
    }
    file_.close();  // forgets the number without closing what the program has there now
    file_ = again;
    fd = file_.raw();
    // A block cut short by the close is not part of the trace.
    if (ftruncate(fd, static_cast<off_t>(complete_size_)) != 0 ||
        lseek(fd, static_cast<off_t>(complete_size_), SEEK_SET) < 0) {
        last_errno_ = errno;
        return -1;
    }
    return fd;
}

bool TraceFile::open(const char* primary, Origin origin) {
    bool created = origin == Origin::Started && try_create(primary);
    int first_errno = last_errno_;
    char candidate[sizeof path_];
    char suffix[64];
    for (int n = 1; !created && n < 1000; ++n) {
        if (origin == Origin::Started) snprintf(suffix, sizeof suffix, ".exec%d.gtrace", n);
        else if (n == 1) snprintf(suffix, sizeof suffix, ".%d.gtrace", static_cast<int>(getpid()));
        else snprintf(suffix, sizeof suffix, ".%d.%d.gtrace", static_cast<int>(getpid()), n);
        if (!derived_trace_path(primary, suffix, candidate, sizeof candidate)) break;
        created = try_create(candidate);
        if (!created && last_errno_ != EEXIST) break;
    }
    if (!created) {
        int err = (first_errno && first_errno != EEXIST) ? first_errno : last_errno_;
        log_line("cannot write trace to %s: %s; the program runs untraced", primary, strerror(err));
        return false;
    }
    format::FileHeader header{};
    memcpy(header.magic, format::kMagic, sizeof header.magic);
    // Only a sampled trace may hold what version 4 added (CacheMisses): a full one stays
    // readable by analyzers that know version 3.
    header.version = sampling_enabled() ? format::kSampledVersion : format::kFullVersion;
    header.flags = format::kFlagBlockChecksums;
    complete_size_ = 0;
    if (!write_all(file_.raw(), &header, sizeof header)) {
        log_line("cannot write trace to %s: %s; the program runs untraced", path_, strerror(last_errno_));
        close();
        return false;
    }
    complete_size_ = sizeof header;
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
    if (!file_.is_open() || size == 0) return file_.is_open();
    int fd = usable_fd();
    if (fd < 0) return false;
    if (write_block_parts(fd, records, size)) return true;
    // The disk took part of the block (full, quota): cut the file back to the previous block
    // boundary, so what was written stays a readable trace ending at a whole block.
    int saved = last_errno_;
    if (ftruncate(fd, static_cast<off_t>(complete_size_)) == 0) lseek(fd, 0, SEEK_END);
    last_errno_ = saved;
    return false;
}

bool TraceFile::write_block_parts(int fd, const uint8_t* records, size_t size) {
    if (!zstd_) zstd_ = ZSTD_createCCtx();
    size_t bound = ZSTD_compressBound(size);
    if (bound > compressed_capacity_) {
        free(compressed_);
        compressed_ = static_cast<uint8_t*>(malloc(bound + sizeof(format::BlockHeader)));
        compressed_capacity_ = compressed_ ? bound : 0;
    }
    format::BlockHeader header{};
    header.magic = format::kBlockMagic;
    header.raw_size = static_cast<uint32_t>(size);
    const uint8_t* payload = records;
    size_t stored = size;
    header.codec = static_cast<uint8_t>(format::Codec::Raw);
    if (zstd_ && compressed_) {
        // Level 2: on compact records it is 40 % smaller than level 1, while level 3 (another
        // 20 % smaller) costs the writer enough CPU to slow a 2-core machine's program down.
        size_t n = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(zstd_), compressed_ + sizeof header, bound, records,
                                     size, 2);
        if (!ZSTD_isError(n) && n < size) {
            header.codec = static_cast<uint8_t>(format::Codec::Zstd);
            payload = compressed_ + sizeof header;
            stored = n;
        }
    }
    header.stored_size = static_cast<uint32_t>(stored);
    header.checksum = format::crc32c_update(format::crc32c(&header, format::kChecksummedBytes), payload, stored);
    // Header and payload in one write() so a SIGKILL leaves no half block.
    if (payload != records) {
        memcpy(compressed_, &header, sizeof header);
        if (!write_all(fd, compressed_, sizeof header + stored)) return false;
        complete_size_ += sizeof header + stored;
        return true;
    }
    iovec parts[2] = {{&header, sizeof header}, {const_cast<uint8_t*>(records), size}};
    ssize_t n = writev(fd, parts, 2);
    if (n == static_cast<ssize_t>(sizeof header + size)) {
        complete_size_ += sizeof header + size;
        return true;
    }
    if (n < 0) {
        last_errno_ = errno;
        return false;
    }
    // A short write: finish it piece by piece.
    size_t done = static_cast<size_t>(n);
    if (done < sizeof header && !write_all(fd, reinterpret_cast<uint8_t*>(&header) + done, sizeof header - done))
        return false;
    size_t payload_done = done > sizeof header ? done - sizeof header : 0;
    if (!write_all(fd, records + payload_done, size - payload_done)) return false;
    complete_size_ += sizeof header + size;
    return true;
}

bool TraceFile::was_removed() const {
    struct stat st;
    int fd = file_.get();
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_nlink == 0;
}

void TraceFile::close() { file_.close(); }

void TraceFile::abandon() {
    close();
    path_[0] = '\0';
}

}  // namespace growtrace::preload
