// The growtrace trace format: constants shared by the writer (preload library) and the
// reader (analyzer). The full description lives in docs/trace-format.md; keep the two in step.
//
// Layout of a trace file:
//   FileHeader                       16 bytes, uncompressed
//   Block*                           each: BlockHeader + payload (raw or one zstd frame);
//                                    the header is 16 bytes in versions 1-2, 20 from 3
// A block's decoded payload is a sequence of whole records:
//   u8 kind | varint payload_length | payload
// Every record is length-prefixed so a reader can skip kinds it does not know.
#pragma once

#include <cstddef>
#include <cstdint>

namespace growtrace::format {

inline constexpr char kMagic[8] = {'G', 'R', 'O', 'W', 'T', 'R', 'C', '\n'};
// Version history:
//   1 = thread runs carry Alloc/Free with addresses and exact ticks.
//   2 = thread runs carry AllocCompact/FreeCompact/Time (the writer matches frees); the
//       v1 kinds stay valid and readers must accept both.
//   3 = every block header ends with a CRC-32C of the header and the stored payload, and the
//       file header's flags say so (kFlagBlockChecksums); a Sampling record follows the
//       Process record: in a sampled trace every allocation record is a sample, weighted by
//       its size (docs/trace-format.md, "Sampling"). Other records are as in version 2.
//   4 = a sampled trace may carry CacheMisses records: the misses of caches that have a
//       maxsize, counted per window instead of one CacheInsert each. Only sampled traces are
//       written as version 4 (kSampledVersion); a full trace is still version 3, so that an
//       analyzer that knows version 3 refuses only the traces it would misread.
//   5 = a block may be stored with codec ZstdWithPrefix: one zstd frame compressed with the
//       decoded records of the block before it as its prefix (docs/trace-format.md, "Block").
//       Sampled traces are written as version 5; full traces are still version 3.
//   6 = a sampled trace may carry ShortLivedSamples records: the samples allocated and freed
//       within one interval of a block, counted per stack and size instead of written as an
//       AllocCompact and a FreeCompact each (docs/trace-format.md, "ShortLivedSamples").
//       Sampled traces are written as version 6; full traces are still version 3.
inline constexpr uint32_t kVersion = 6;
inline constexpr uint32_t kFullVersion = 3;
inline constexpr uint32_t kSampledVersion = 6;
inline constexpr uint32_t kFirstPrefixVersion = 5;  // the first version that may use ZstdWithPrefix

// The compact records (AllocCompact, FreeCompact, thread events) carry no time of their own:
// they happen at the last Time record's, which is written only once the clock has moved by a
// quantum, and in sampled traces rounded down to a multiple of it. A compact event's true time
// therefore lies in [its time, its time + 2 quanta) in clock ticks; records with a ticks field
// of their own (CacheInsert, CacheSize, ...) are exact. Readers comparing the two allow for it.
inline constexpr int64_t kTimeQuantumTicks = int64_t{1} << 18;         // about 0.1 ms at 2.5 GHz
inline constexpr int64_t kSampledTimeQuantumTicks = int64_t{1} << 23;  // about 3.4 ms

struct FileHeader {
    char magic[8];
    uint32_t version;   // little endian
    uint32_t flags;     // versions 1-2: reserved, 0; from 3: kKnownFlags, anything else is corrupt
};
static_assert(sizeof(FileHeader) == 16);

inline constexpr uint32_t kFlagBlockChecksums = 1u << 0;  // version 3: BlockHeader::checksum is set
inline constexpr uint32_t kKnownFlags = kFlagBlockChecksums;

inline constexpr uint32_t kBlockMagic = 0x4b425447;  // "GTBK" little endian

// ZstdWithPrefix (version 5): the frame refers back into the previous block's decoded records,
// whatever that block's codec; the first block of a file never uses it.
enum class Codec : uint8_t { Raw = 0, Zstd = 1, ZstdWithPrefix = 2 };

struct BlockHeader {
    uint32_t magic;        // kBlockMagic
    uint8_t codec;         // Codec
    uint8_t reserved[3];
    uint32_t stored_size;  // bytes of payload that follow in the file
    uint32_t raw_size;     // bytes of records after decoding
    // From version 3: CRC-32C (format/checksum.h) of the 16 bytes above, then of the
    // stored_size bytes of payload. Versions 1-2 have no such field: their headers end above.
    uint32_t checksum;
};
static_assert(sizeof(BlockHeader) == 20);
inline constexpr uint32_t kBlockHeaderSizeV1 = 16;  // versions 1 and 2
inline constexpr uint32_t kChecksummedBytes = 16;   // of the header, before `checksum`

inline constexpr uint32_t block_header_size(uint32_t version) {
    return version >= 3 ? sizeof(BlockHeader) : kBlockHeaderSizeV1;
}

// Upper bound a reader accepts for one block, so a corrupt size cannot make it allocate
// without limit.
inline constexpr uint32_t kMaxBlockSize = 64u << 20;

// Record kinds. Values are never reused; new kinds are only ever added. Each kind's fields are
// defined once, in format/records.h (records::<the kind's name>: a struct and its field list);
// docs/trace-format.md ("Records") describes them with the same names.
enum class RecordKind : uint8_t {
    Process = 0x01,       // process identity, first record of every trace
    Module = 0x02,        // a loaded object and its executable segments
    ModulesReset = 0x03,  // module list changed (dlclose): the modules that follow replace the set
    // Following event records belong to this thread: a run. Event ticks are deltas from the
    // previous event of the same run (starting at base_ticks); event addresses are zigzag
    // deltas from the previous address of the same run (from 0).
    Thread = 0x04,
    StackNode = 0x05,   // stack tree node (a Python frame's ip carries kPythonFrameTag)
    PyFrame = 0x06,     // a Python source location used in stacks
    ThreadName = 0x07,  // thread name
    // The run's clock moved (v2). Compact events happened at the run's current ticks; thread
    // events with their own dticks (0x30-0x32, 0x35, 0x36) are relative to it and move it.
    Time = 0x08,

    Alloc = 0x10,         // allocation (v1), ticks and address as run deltas
    Free = 0x11,          // free (v1)
    AllocCompact = 0x12,  // allocation (v2): the n-th AllocCompact of the file (from 1) is allocation n
    FreeCompact = 0x13,   // free (v2) of allocation (AllocCompact records so far) - age

    TimeMark = 0x20,     // periodic time mark from the tracer's writer thread
    End = 0x21,          // normal end of trace
    Fork = 0x22,         // this process forked; the child traces to its own file
    Exec = 0x23,         // this process is about to exec; the new image traces to its own file
    TracerError = 0x24,  // the tracer stopped or lost data
    // The program began to exit (for CPython: its last atexit callback). Frees after it are
    // shutdown work: the analyzer measures what the program retained at this point.
    Exiting = 0x25,
    // How allocations were recorded (v3), right after the Process record: 0 = every allocation,
    // N = sampled by bytes (docs/trace-format.md, "Sampling").
    Sampling = 0x26,
    // The ledger of a trace, written just before End (added without a version change): what the
    // hooks recorded, what the file holds, and why they differ (docs/trace-format.md, "Ledger").
    Ledger = 0x27,

    // CPython records (docs/cpython.md). CacheCreate, CacheInsert, TypeCreate, Collection and
    // Container are thread events: they belong to the current Thread run and start with
    // svarint dticks like Alloc. Addresses are plain.
    CacheCreate = 0x30,  // a functools.lru_cache announced by the agent (a later one with the same id replaces it)
    CacheInsert = 0x31,  // a miss of a cache: its begin, then its end
    TypeCreate = 0x32,   // a class created at run time
    CacheSize = 0x33,    // entry counts of caches, sampled by the writer
    // Version 4, sampled traces only: misses of caches with a maxsize, counted instead of written.
    CacheMisses = 0x34,
    Collection = 0x35,  // a full collection of the cyclic garbage collector starting or stopping
    Container = 0x36,   // one container as one walk of the agent found it (docs/containers.md)
    // Version 6, sampled traces only, outside thread runs: samples allocated and freed within one
    // interval, counted instead of written one by one (docs/trace-format.md, "ShortLivedSamples").
    ShortLivedSamples = 0x37,
};

// A sampled trace's writer counts a sample in a ShortLivedSamples record only when its
// allocation and its free fall into one interval of 2^shift ticks counted from the trace's
// start, with shift the narrowest window a reader can use that divides the trace so far into at
// most this many windows: a reader whose windows are that coarse or coarser sees the sample
// born and dead in the same window, as it would have from the two records.
inline constexpr uint32_t kShortLivedReaderWindows = 512;

inline constexpr uint64_t kPythonFrameTag = uint64_t{1} << 63;

// A sampled trace keeps the key description of a cache miss (CacheInsert) until the cache has
// shown this many distinct ones; later ones are written empty (docs/trace-format.md).
inline constexpr size_t kSampledKeyDescriptionsPerCache = 64;

// A CPython class object is garbage-collected: its block starts with the collector's header,
// this many bytes before the object's address (CPython 3.10 to 3.13).
inline constexpr uint64_t kPythonGcHeaderBytes = 16;

}  // namespace growtrace::format
