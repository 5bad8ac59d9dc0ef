// Decoded trace records: plain structs, one per record kind of format/trace_format.h, as the
// analyzer holds them: strings owned, lists as vectors. Event records (Alloc, Free) carry
// absolute ticks and addresses: the reader has already applied the per-thread-run deltas.
// Records of plain numbers that need no such work are the format's own definitions
// (format/records.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/records.h"

namespace growtrace {

struct ProcessRecord {
    uint64_t pid = 0;
    uint64_t ppid = 0;
    uint64_t start_ticks = 0;
    uint64_t start_monotonic_ns = 0;
    uint64_t start_realtime_ns = 0;
    std::string exe;
    std::vector<std::string> argv;  // cmdline split at '\0'
    std::string parent_trace;
};

struct Segment {
    uint64_t start = 0;  // absolute address in the traced process
    uint64_t size = 0;
};

struct ModuleRecord {
    uint64_t base = 0;  // load bias
    std::string path;
    std::string build_id;  // raw bytes
    std::vector<Segment> segments;  // executable PT_LOAD segments
};

using ModulesResetRecord = format::records::ModulesReset;

using ThreadRecord = format::records::Thread;

struct StackNodeRecord {
    uint64_t id = 0;
    uint64_t parent = 0;  // 0 = root
    uint64_t ip = 0;
};

struct PyFrameRecord {
    uint64_t id = 0;
    std::string file;
    std::string function;
    uint64_t line = 0;
};

struct ThreadNameRecord {
    uint64_t tid = 0;
    std::string name;
};

struct AllocEvent {
    uint64_t tid = 0;
    uint64_t ticks = 0;
    uint64_t size = 0;
    uint64_t addr = 0;
    uint64_t stack_id = 0;
};

struct FreeEvent {
    uint64_t tid = 0;
    uint64_t ticks = 0;
    uint64_t addr = 0;
};

// Version 2 compact events: the writer matched frees to allocations itself. Allocation n is
// the n-th AllocCompact of the file (from 1); a FreeCompact names the n it frees.
struct AllocCompactEvent {
    uint64_t tid = 0;
    uint64_t ticks = 0;
    uint64_t size = 0;
    uint64_t stack_id = 0;
    uint64_t seq = 0;
};

struct FreeCompactEvent {
    uint64_t tid = 0;
    uint64_t ticks = 0;
    uint64_t seq = 0;
};

// Version 6, sampled traces: samples allocated and freed within one interval of 2^shift ticks,
// counted instead of written one by one (ShortLivedSamples). Each group is `count` samples of
// `size` bytes from `stack_id`, born and dead in the interval that starts at `ticks`.
struct ShortLivedGroup {
    uint64_t ticks = 0;
    uint64_t stack_id = 0;
    uint64_t size = 0;
    uint64_t count = 0;
};

struct ShortLivedSamplesRecord {
    uint64_t last_ticks = 0;  // the latest of their frees
    uint64_t shift = 0;       // intervals are 2^shift ticks wide
    std::vector<ShortLivedGroup> groups;  // by interval, then stack, then size
};

using TimeMarkRecord = format::records::TimeMark;

using EndRecord = format::records::End;

struct ForkRecord {
    uint64_t child_pid = 0;
    std::string path;
};

struct ExecRecord {
    std::string path;
};

// The tracer's ledger, at the end of a trace (docs/trace-format.md, "Ledger").
using LedgerRecord = format::records::Ledger;

struct TracerErrorRecord {
    uint64_t ticks = 0;
    std::string message;
};

}  // namespace growtrace
