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

// Record kinds. Values are never reused; new kinds are only ever added.
// "varint" = unsigned LEB128; "svarint" = zigzag-encoded signed LEB128;
// "string" = varint length + bytes (no terminator).
enum class RecordKind : uint8_t {
    // Process identity, first record of every trace.
    //   varint pid, varint ppid, varint start_ticks, varint start_monotonic_ns,
    //   varint start_realtime_ns, string exe, string cmdline (arguments joined by '\0'),
    //   string parent_trace (empty unless this trace was started by fork or exec)
    Process = 0x01,
    // A loaded object.  varint base (load bias), string path, string build_id (raw bytes),
    //   varint segment_count, then per executable PT_LOAD segment: varint start, varint size
    //   (absolute addresses in the traced process).
    Module = 0x02,
    // Module list changed (dlclose). varint ticks. The modules that follow replace the set.
    ModulesReset = 0x03,
    // Following event records belong to this thread.   varint tid, varint base_ticks
    // Event ticks are deltas from the previous event of the same run (starting at base_ticks);
    // event addresses are zigzag deltas from the previous address of the same run (from 0).
    Thread = 0x04,
    // Stack tree node. varint id, varint parent_id (0 = root), varint ip.
    // A native ip is a return address (the analyzer looks up ip - 1) except for the innermost
    // frame; a Python frame has ip = PyFrame id (see PyFrame) with the tag bit kPythonFrameTag.
    StackNode = 0x05,
    // A Python source location used in stacks. varint id, string file, string function,
    //   varint line.
    PyFrame = 0x06,
    // Thread name.  varint tid, string name
    ThreadName = 0x07,
    // The run's clock moved (v2).  svarint dticks from the run's current ticks. Compact events
    // happened at the run's current ticks; thread events with their own dticks (0x30-0x32)
    // are relative to it and move it.
    Time = 0x08,

    // Allocation. svarint dticks, varint size, svarint daddr, varint stack_id
    Alloc = 0x10,
    // Free. svarint dticks, svarint daddr
    Free = 0x11,
    // Allocation (v2): varint size, varint stack_id. The n-th AllocCompact of the file (from 1)
    // is allocation n.
    AllocCompact = 0x12,
    // Free (v2): varint age = (number of AllocCompact records so far) - n, for allocation n.
    FreeCompact = 0x13,

    // Periodic time mark from the tracer's writer thread.
    //   varint ticks, varint monotonic_ns, varint rss_bytes
    TimeMark = 0x20,
    // Normal end of trace. varint ticks, varint monotonic_ns
    End = 0x21,
    // This process forked; the child traces to its own file.  varint child_pid, string path
    Fork = 0x22,
    // This process is about to exec; the new image traces to its own file. string path
    Exec = 0x23,
    // The tracer stopped or lost data.  varint ticks, string message
    TracerError = 0x24,
    // The program began to exit (for CPython: its last atexit callback, before the interpreter
    // frees modules and caches). varint ticks. Frees after it are shutdown work: the analyzer
    // measures what the program retained at this point.
    Exiting = 0x25,
    // How allocations were recorded (v3), written right after the Process record.
    //   varint mean_bytes_between_samples: 0 = every allocation; N = sampled by bytes with a
    //   mean of N bytes between sample points: an allocation record of size s is a sample
    //   that stands for 1/p allocations and s/p bytes, p = 1 - exp(-s/N). A size-0 allocation
    //   record is not a sample (weight 0): a block followed for its free only (a class object
    //   named by a TypeCreate).
    Sampling = 0x26,
    // The ledger of a trace, written by the tracer just before End (added without a version
    // change: a reader that does not know it skips it). What the hooks recorded, what the
    // file holds, and why they differ (docs/trace-format.md, "Ledger"):
    //   varint allocations_recorded, varint frees_recorded (committed by the hooks and handed
    //   to the writer), varint allocations_written (AllocCompact records, with those a
    //   ShortLivedSamples record counts), varint frees_written (FreeCompact, the same way),
    //   varint live (allocations the tracer holds live at the end: allocations_written -
    //   frees_written), varint weightless (size-0 allocations the writer added, see
    //   Sampling), varint untraced_frees (frees that found no allocation: memory allocated
    //   before tracing began or by a path the tracer does not see; not written), varint
    //   inferred_frees (an address handed out again while the trace held it live: the old
    //   block's free written then; included in frees_written), varint lost_events (events the
    //   hooks could not record)
    Ledger = 0x27,

    // CPython records. CacheCreate, CacheInsert and TypeCreate are thread events: they belong
    // to the current Thread run and start with svarint dticks like Alloc. Addresses are plain.
    // A functools.lru_cache announced by the Python agent (a later one with the same cache_id
    // replaces the earlier).
    //   svarint dticks, varint cache_id, varint flags (GROWTRACE_PY_CACHE_* of contracts/growtrace_py_api.h),
    //   svarint maxsize (-1 unbounded), varint wrapper_address, varint dict_address,
    //   varint creation_stack_id (0 unknown), varint entries, string module, string qualname,
    //   string creator_module, string creator_file, varint creator_line,
    //   string bound_names ('\0'-separated)
    CacheCreate = 0x30,
    // A miss of a cache. The allocations of this thread between phase 0 and its end are the
    // memory computed for the entry.
    //   svarint dticks, varint phase (0 begin, 1 stored, 2 raised), varint cache_id,
    //   varint insert_seq; phase 0: varint stack_id, varint entries_before, string key_desc,
    //   varint n, n x varint key_type_address; phase 1/2: string value_type
    CacheInsert = 0x31,
    // A class created at run time.  svarint dticks, varint source (0 PyType_Ready hook,
    //   1 agent gc scan), varint address, varint stack_id (0: use the allocation at address),
    //   string module, string qualname, string metaclass; v2 appends varint type_allocation:
    //   1 + age (as in FreeCompact) of the AllocCompact holding the class object, 0 unknown
    TypeCreate = 0x32,
    // Entry counts of caches, sampled by the writer.  varint ticks, varint count,
    //   count x (varint cache_id, svarint entries); entries -1 = the cache was destroyed
    CacheSize = 0x33,
    // Version 4, sampled traces only: misses of caches with a maxsize (never findings) that
    // the writer counted instead of writing them (docs/trace-format.md, "CacheMisses").
    //   varint ticks, varint count, count x (varint cache_id, varint misses, varint stored,
    //   varint first_ticks, varint last_ticks - first_ticks, varint first_entries_before,
    //   varint last_entries_after, varint stacks, stacks x (varint stack_id step, varint misses)):
    //   stack ids in increasing order, each the step from the previous one (the first from 0)
    CacheMisses = 0x34,
    // A collection of the CPython cyclic garbage collector, reported by the agent for the oldest
    // generation (a full collection): a thread event of the collecting thread. The frees of this
    // thread between its start and its stop are garbage being reclaimed.
    //   svarint dticks, varint phase (0 start, 1 stop), varint generation,
    //   varint flags (1: run by the agent at the shutdown mark)
    Collection = 0x35,
    // One container as one walk of the CPython agent over the program's containers found it
    // (docs/containers.md): a thread event of the walking thread, one record per container.
    // The allocations come first: the writer turns each block address the agent gave into
    // 1 + the age (as in FreeCompact) of the live allocation starting there, 0 when none is
    // traced (a sampled trace's unsampled block, a static object).
    //   svarint dticks, varint n, n x varint allocation, varint walk_seq, varint flags (1 heap
    //   pass, 2 the final walk at the shutdown mark), varint walk_ns, varint container_id,
    //   varint kind (1 dict, 2 list, 3 set, 4 deque, 5 WeakValueDictionary, 6 WeakKeyDictionary,
    //   7 WeakSet), varint entries, varint table (1-based index into the allocations, 0 none),
    //   string name, string owner_type, string key_types, string value_types ('\0'-separated
    //   type names of its newest entries), varint m, m x varint entry (1-based index)
    Container = 0x36,
    // Version 6, sampled traces only, outside thread runs: samples that were allocated and
    // freed within one interval of 2^shift ticks, counted instead of written one by one
    // (docs/trace-format.md, "ShortLivedSamples"). Interval i starts at first_ticks +
    // i * 2^shift; intervals are aligned on the Process record's start_ticks.
    //   varint last_ticks (the latest of their frees), varint shift, varint first_ticks,
    //   varint intervals, intervals x (varint interval step, varint stacks, stacks x (varint
    //   stack_id step, varint sizes, sizes x (varint size step, varint count))): intervals,
    //   stack ids and sizes in increasing order, each the step from the previous one (the
    //   first from 0)
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
