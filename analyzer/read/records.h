// Decoded trace records: plain structs, one per record kind of format/trace_format.h.
// Event records (Alloc, Free) carry absolute ticks and addresses: the reader has already
// applied the per-thread-run deltas.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

struct ModulesResetRecord {
    uint64_t ticks = 0;
};

struct ThreadRecord {
    uint64_t tid = 0;
    uint64_t base_ticks = 0;
};

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

struct TimeMarkRecord {
    uint64_t ticks = 0;
    uint64_t monotonic_ns = 0;
    uint64_t rss_bytes = 0;
};

struct EndRecord {
    uint64_t ticks = 0;
    uint64_t monotonic_ns = 0;
};

struct ForkRecord {
    uint64_t child_pid = 0;
    std::string path;
};

struct ExecRecord {
    std::string path;
};

// The tracer's ledger, at the end of a trace (format/trace_format.h, RecordKind::Ledger).
struct LedgerRecord {
    uint64_t allocations_recorded = 0;
    uint64_t frees_recorded = 0;
    uint64_t allocations_written = 0;
    uint64_t frees_written = 0;
    uint64_t live = 0;
    uint64_t weightless = 0;
    uint64_t untraced_frees = 0;
    uint64_t inferred_frees = 0;
    uint64_t lost_events = 0;
};

struct TracerErrorRecord {
    uint64_t ticks = 0;
    std::string message;
};

}  // namespace growtrace
