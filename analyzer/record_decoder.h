// Turns raw records into the structs of records.h and hands them to a visitor. Owns the one
// piece of cross-record state of the format: the current thread run, from which Alloc and
// Free records get their absolute ticks and addresses.
#pragma once

#include <cstdint>
#include <string>

#include "analyzer/records.h"
#include "analyzer/trace_reader.h"

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
    virtual void on_time_mark(const TimeMarkRecord&) {}
    virtual void on_end(const EndRecord&) {}
    virtual void on_fork(const ForkRecord&) {}
    virtual void on_exec(const ExecRecord&) {}
    virtual void on_tracer_error(const TracerErrorRecord&) {}
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

    RecordVisitor& visitor_;
    bool saw_end_ = false;
    // Current thread run.
    bool in_run_ = false;
    uint64_t tid_ = 0;
    uint64_t ticks_ = 0;
    uint64_t addr_ = 0;
};

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
