// Turns raw records into the structs of records.h and hands them to a visitor. Owns the one
// piece of cross-record state of the format: the current thread run, from which Alloc and
// Free records get their absolute ticks and addresses.
#pragma once

#include <cstdint>
#include <string>

#include "analyzer/read/python_records.h"
#include "analyzer/read/records.h"
#include "analyzer/read/trace_reader.h"

namespace growtrace {

// Override what you need; every callback defaults to doing nothing.
class RecordVisitor {
public:
    virtual ~RecordVisitor() = default;
    // Called for every record before its typed callback (the dumper prints positions here).
    virtual void on_record(const RawRecord&) {}
    virtual void on_process(const ProcessRecord&) {}
    virtual void on_module(const ModuleRecord&) {}
    virtual void on_modules_reset(const ModulesResetRecord&) {}
    virtual void on_thread(const ThreadRecord&) {}
    virtual void on_stack_node(const StackNodeRecord&) {}
    virtual void on_py_frame(const PyFrameRecord&) {}
    virtual void on_thread_name(const ThreadNameRecord&) {}
    virtual void on_alloc(const AllocEvent&) {}
    virtual void on_free(const FreeEvent&) {}
    virtual void on_run_time(uint64_t /*tid*/, uint64_t /*ticks*/) {}  // a Time record moved the run's clock
    virtual void on_alloc_compact(const AllocCompactEvent&) {}
    virtual void on_free_compact(const FreeCompactEvent&) {}
    // Samples born and dead within one interval, counted by the writer (version 6).
    virtual void on_short_lived_samples(const ShortLivedSamplesRecord&) {}
    virtual void on_time_mark(const TimeMarkRecord&) {}
    virtual void on_end(const EndRecord&) {}
    virtual void on_fork(const ForkRecord&) {}
    virtual void on_exec(const ExecRecord&) {}
    virtual void on_tracer_error(const TracerErrorRecord&) {}
    virtual void on_ledger(const LedgerRecord&) {}
    virtual void on_cache_create(const CacheCreateRecord&) {}
    virtual void on_cache_insert(const CacheInsertRecord&) {}
    virtual void on_cache_size(const CacheSizeRecord&) {}
    virtual void on_type_create(const TypeCreateRecord&) {}
    virtual void on_cache_misses(const CacheMissesRecord&) {}
    virtual void on_collection(const CollectionRecord&) {}
    virtual void on_container(const ContainerRecord&) {}
    // The program began to exit at these ticks (Exiting record).
    virtual void on_exiting(uint64_t /*ticks*/) {}
    // How allocations were recorded (Sampling record, v3): mean bytes between samples, 0 =
    // every allocation. Traces before v3 have none: every allocation.
    virtual void on_sampling(uint64_t /*mean_bytes*/) {}
    // CPython records (0x30..0x3f) until their layout is specified, and kinds this analyzer
    // does not know (written by a newer tracer): skipped by length, shown raw by the dumper.
    virtual void on_unknown(const RawRecord&) {}
};

class RecordDecoder {
public:
    explicit RecordDecoder(RecordVisitor& visitor) : visitor_(visitor) {}

    // Decodes one record and calls the visitor. Throws TraceError naming the record's position
    // when the payload is malformed. Trailing payload bytes after the known fields are ignored
    // so that a newer writer may append fields to an existing kind.
    void decode(const RawRecord& rec);

    bool saw_end() const { return saw_end_; }

private:
    void decode_alloc(const RawRecord& rec, format::Cursor& c);
    void decode_free(const RawRecord& rec, format::Cursor& c);
    void require_thread(const RawRecord& rec) const;
    uint64_t advance_clock(int64_t dticks);
    uint64_t allocation_named(uint64_t holder) const;
    bool decode_v2_event(const RawRecord& rec, format::Cursor& c);
    // False when the record is not of their family.
    bool decode_process_record(const RawRecord& rec, format::Cursor& c);
    bool decode_trace_mark(const RawRecord& rec, format::Cursor& c);
    bool decode_python_record(const RawRecord& rec, format::Cursor& c);
    ThreadRecord enter_run(const RawRecord& rec, format::Cursor& c);
    // The thread events of the CPython agent, which move the run's clock.
    CacheCreateRecord decode_cache_create(const RawRecord& rec, format::Cursor& c);
    CacheInsertRecord decode_cache_insert(const RawRecord& rec, format::Cursor& c);
    TypeCreateRecord decode_type_create(const RawRecord& rec, format::Cursor& c);
    ContainerRecord decode_container(const RawRecord& rec, format::Cursor& c);
    CollectionRecord decode_collection(const RawRecord& rec, format::Cursor& c);

    RecordVisitor& visitor_;
    bool saw_end_ = false;
    // Current thread run.
    bool in_run_ = false;
    uint64_t tid_ = 0;
    uint64_t ticks_ = 0;
    uint64_t addr_ = 0;
    uint64_t compact_allocs_ = 0;  // AllocCompact records so far (version 2)
};

// Record kinds added in format version 2, named here by value so this code builds against
// either revision of format/trace_format.h.
inline constexpr uint8_t kKindTime = 0x08;
inline constexpr uint8_t kKindAllocCompact = 0x12;
inline constexpr uint8_t kKindFreeCompact = 0x13;

struct ReadSummary {
    uint32_t version = 0;
    bool ended_cleanly = false;  // an End record was seen
    uint64_t blocks = 0;
    uint64_t records = 0;
    uint64_t file_size = 0;
};

// Reads a whole trace, streaming block by block. Throws TraceError.
ReadSummary read_trace(const std::string& path, RecordVisitor& visitor);

}  // namespace growtrace
