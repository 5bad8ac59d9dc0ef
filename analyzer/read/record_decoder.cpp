#include "analyzer/read/record_decoder.h"

#include <algorithm>

#include <fmt/format.h>

#include "analyzer/read/trace_error.h"

namespace growtrace {

namespace {

using format::Cursor;
using format::RecordKind;

[[noreturn]] void malformed(const RawRecord& rec, const char* what) {
    throw TraceError(fmt::format("corrupt trace: {}: {}", describe_position(rec), what));
}

uint64_t get_varint(const RawRecord& rec, Cursor& c) {
    uint64_t v;
    if (!c.varint(v)) malformed(rec, "payload too short or malformed varint");
    return v;
}

int64_t get_svarint(const RawRecord& rec, Cursor& c) {
    int64_t v;
    if (!c.svarint(v)) malformed(rec, "payload too short or malformed varint");
    return v;
}

std::string get_string(const RawRecord& rec, Cursor& c) {
    const uint8_t* data;
    size_t size;
    if (!c.bytes(data, size)) malformed(rec, "string runs past the end of the record");
    return std::string(reinterpret_cast<const char*>(data), size);
}

std::vector<std::string> split_cmdline(const std::string& joined) {
    std::vector<std::string> argv;
    if (joined.empty()) return argv;
    size_t start = 0;
    while (true) {
        size_t end = joined.find('\0', start);
        if (end == std::string::npos) {
            argv.push_back(joined.substr(start));
            break;
        }
        argv.push_back(joined.substr(start, end - start));
        start = end + 1;
        if (start == joined.size()) break;  // tolerate a trailing terminator
    }
    return argv;
}

// Counts are checked against the bytes left before anything is reserved: each cache takes at
// least 8 bytes, each stack 2.
CacheMissesRecord decode_cache_misses(const RawRecord& rec, Cursor& c) {
    CacheMissesRecord r;
    r.ticks = get_varint(rec, c);
    const uint64_t n = get_varint(rec, c);
    if (n > c.remaining() / 8) malformed(rec, "cache count exceeds record size");
    r.caches.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
        CacheMissCounts m;
        m.cache_id = get_varint(rec, c);
        m.misses = get_varint(rec, c);
        m.stored = get_varint(rec, c);
        m.first_ticks = get_varint(rec, c);
        m.last_ticks = m.first_ticks + get_varint(rec, c);
        m.first_entries_before = get_varint(rec, c);
        m.last_entries_after = get_varint(rec, c);
        const uint64_t stacks = get_varint(rec, c);
        if (stacks > c.remaining() / 2) malformed(rec, "stack count exceeds record size");
        for (uint64_t s = 0, id = 0; s < stacks; ++s) {
            id += get_varint(rec, c);  // steps from the previous id
            m.stacks.emplace_back(id, get_varint(rec, c));
        }
        r.caches.push_back(std::move(m));
    }
    return r;
}

// Each interval, stack and size takes at least two bytes: counts are checked against the bytes
// left before anything is reserved.
ShortLivedSamplesRecord decode_short_lived(const RawRecord& rec, Cursor& c) {
    ShortLivedSamplesRecord r;
    r.last_ticks = get_varint(rec, c);
    r.shift = get_varint(rec, c);
    if (r.shift >= 64) malformed(rec, "interval shift of 64 bits or more");
    const uint64_t first_ticks = get_varint(rec, c);
    auto count = [&](const char* what) {
        const uint64_t n = get_varint(rec, c);
        if (n > c.remaining() / 2) malformed(rec, what);
        return n;
    };
    const uint64_t intervals = count("interval count exceeds record size");
    for (uint64_t i = 0, interval = 0; i < intervals; ++i) {
        interval += get_varint(rec, c);  // steps from the previous interval
        const uint64_t ticks = first_ticks + (interval << r.shift);
        const uint64_t stacks = count("stack count exceeds record size");
        for (uint64_t s = 0, stack = 0; s < stacks; ++s) {
            stack += get_varint(rec, c);
            const uint64_t sizes = count("size count exceeds record size");
            for (uint64_t z = 0, size = 0; z < sizes; ++z) {
                size += get_varint(rec, c);
                r.groups.push_back(ShortLivedGroup{ticks, stack, size, get_varint(rec, c)});
            }
        }
    }
    return r;
}

}  // namespace

void RecordDecoder::require_thread(const RawRecord& rec) const {
    if (!in_run_) malformed(rec, "event before any Thread record");
}

void RecordDecoder::decode_alloc(const RawRecord& rec, Cursor& c) {
    require_thread(rec);
    AllocEvent e;
    e.tid = tid_;
    // Unsigned wrap-around arithmetic: a corrupt delta gives a strange value, never UB.
    ticks_ += static_cast<uint64_t>(get_svarint(rec, c));
    e.ticks = ticks_;
    e.size = get_varint(rec, c);
    addr_ += static_cast<uint64_t>(get_svarint(rec, c));
    e.addr = addr_;
    e.stack_id = get_varint(rec, c);
    visitor_.on_alloc(e);
}

void RecordDecoder::decode_free(const RawRecord& rec, Cursor& c) {
    require_thread(rec);
    FreeEvent e;
    e.tid = tid_;
    ticks_ += static_cast<uint64_t>(get_svarint(rec, c));
    e.ticks = ticks_;
    addr_ += static_cast<uint64_t>(get_svarint(rec, c));
    e.addr = addr_;
    visitor_.on_free(e);
}

// Version 2 thread events. Time moves the run's clock; compact events happen at the run's
// current ticks. Returns false if rec is not one of them.
bool RecordDecoder::decode_v2_event(const RawRecord& rec, Cursor& c) {
    switch (rec.kind) {
        case kKindTime:
            require_thread(rec);
            ticks_ += static_cast<uint64_t>(get_svarint(rec, c));
            visitor_.on_run_time(tid_, ticks_);
            return true;
        case kKindAllocCompact: {
            require_thread(rec);
            AllocCompactEvent e;
            e.tid = tid_;
            e.ticks = ticks_;
            e.size = get_varint(rec, c);
            e.stack_id = get_varint(rec, c);
            e.seq = ++compact_allocs_;
            visitor_.on_alloc_compact(e);
            return true;
        }
        case kKindFreeCompact: {
            require_thread(rec);
            const uint64_t age = get_varint(rec, c);
            if (age >= compact_allocs_) malformed(rec, "FreeCompact names an allocation before the first one");
            visitor_.on_free_compact(FreeCompactEvent{tid_, ticks_, compact_allocs_ - age});
            return true;
        }
        default:
            return false;
    }
}

void RecordDecoder::decode(const RawRecord& rec) {
    visitor_.on_record(rec);
    Cursor c(rec.data, rec.data + rec.size);
    if (decode_v2_event(rec, c) || decode_process_record(rec, c) || decode_python_record(rec, c)) return;
    visitor_.on_unknown(rec);
}

ProcessRecord RecordDecoder::decode_process(const RawRecord& rec, Cursor& c) {
        ProcessRecord r;
        r.pid = get_varint(rec, c);
        r.ppid = get_varint(rec, c);
        r.start_ticks = get_varint(rec, c);
        r.start_monotonic_ns = get_varint(rec, c);
        r.start_realtime_ns = get_varint(rec, c);
        r.exe = get_string(rec, c);
        r.argv = split_cmdline(get_string(rec, c));
        r.parent_trace = get_string(rec, c);
    return r;
}

ModuleRecord RecordDecoder::decode_module(const RawRecord& rec, Cursor& c) {
        ModuleRecord r;
        r.base = get_varint(rec, c);
        r.path = get_string(rec, c);
        r.build_id = get_string(rec, c);
        const uint64_t n = get_varint(rec, c);
        // Each segment takes at least two bytes, so a count larger than that is corrupt;
        // checking first keeps a bogus count from reserving memory.
        if (n > c.remaining() / 2) malformed(rec, "segment count exceeds record size");
        r.segments.reserve(static_cast<size_t>(n));
        for (uint64_t i = 0; i < n; ++i) {
            Segment s;
            s.start = get_varint(rec, c);
            s.size = get_varint(rec, c);
            r.segments.push_back(s);
        }
    return r;
}

// A Thread record starts a run: the events after it are that thread's, their clock and
// addresses deltas from its base.
ThreadRecord RecordDecoder::enter_run(const RawRecord& rec, Cursor& c) {
    ThreadRecord r;
    r.tid = get_varint(rec, c);
    r.base_ticks = get_varint(rec, c);
    in_run_ = true;
    tid_ = r.tid;
    ticks_ = r.base_ticks;
    addr_ = 0;
    return r;
}

// The process, its modules, threads and stacks, the v1 events, and the trace's own marks.
bool RecordDecoder::decode_process_record(const RawRecord& rec, Cursor& c) {
    switch (static_cast<RecordKind>(rec.kind)) {
        default:
            return false;
        case RecordKind::Process:
            visitor_.on_process(decode_process(rec, c));
            return true;
        case RecordKind::Module:
            visitor_.on_module(decode_module(rec, c));
            return true;
        case RecordKind::ModulesReset:
            visitor_.on_modules_reset(ModulesResetRecord{get_varint(rec, c)});
            return true;
        case RecordKind::Thread:
            visitor_.on_thread(enter_run(rec, c));
            return true;
        case RecordKind::StackNode: {
            StackNodeRecord r;
            r.id = get_varint(rec, c);
            r.parent = get_varint(rec, c);
            r.ip = get_varint(rec, c);
            visitor_.on_stack_node(r);
            return true;
        }
        case RecordKind::PyFrame: {
            PyFrameRecord r;
            r.id = get_varint(rec, c);
            r.file = get_string(rec, c);
            r.function = get_string(rec, c);
            r.line = get_varint(rec, c);
            visitor_.on_py_frame(r);
            return true;
        }
        case RecordKind::ThreadName: {
            ThreadNameRecord r;
            r.tid = get_varint(rec, c);
            r.name = get_string(rec, c);
            visitor_.on_thread_name(r);
            return true;
        }
        case RecordKind::Alloc: decode_alloc(rec, c); return true;
        case RecordKind::Free: decode_free(rec, c); return true;
        case RecordKind::TimeMark: {
            TimeMarkRecord r;
            r.ticks = get_varint(rec, c);
            r.monotonic_ns = get_varint(rec, c);
            r.rss_bytes = get_varint(rec, c);
            visitor_.on_time_mark(r);
            return true;
        }
        case RecordKind::End: {
            EndRecord r;
            r.ticks = get_varint(rec, c);
            r.monotonic_ns = get_varint(rec, c);
            saw_end_ = true;
            visitor_.on_end(r);
            return true;
        }
        case RecordKind::Fork: {
            ForkRecord r;
            r.child_pid = get_varint(rec, c);
            r.path = get_string(rec, c);
            visitor_.on_fork(r);
            return true;
        }
        case RecordKind::Exec:
            visitor_.on_exec(ExecRecord{get_string(rec, c)});
            return true;
        case RecordKind::TracerError: {
            TracerErrorRecord r;
            r.ticks = get_varint(rec, c);
            r.message = get_string(rec, c);
            visitor_.on_tracer_error(r);
            return true;
        }
        case RecordKind::Exiting:
            visitor_.on_exiting(get_varint(rec, c));
            return true;
        case RecordKind::Sampling:
            visitor_.on_sampling(get_varint(rec, c));
            return true;
        case RecordKind::Ledger: {
            LedgerRecord r;
            for (uint64_t* field : {&r.allocations_recorded, &r.frees_recorded, &r.allocations_written,
                                    &r.frees_written, &r.live, &r.weightless, &r.untraced_frees, &r.inferred_frees,
                                    &r.lost_events})
                *field = get_varint(rec, c);
            visitor_.on_ledger(r);
            return true;
        }
        case RecordKind::ShortLivedSamples:
            visitor_.on_short_lived_samples(decode_short_lived(rec, c));
            return true;
    }
}

CacheCreateRecord RecordDecoder::decode_cache_create(const RawRecord& rec, Cursor& c) {
        require_thread(rec);
        CacheCreateRecord r;
        r.tid = tid_;
        r.ticks = ticks_ += static_cast<uint64_t>(get_svarint(rec, c));
        r.cache_id = get_varint(rec, c);
        r.flags = get_varint(rec, c);
        r.maxsize = get_svarint(rec, c);
        r.wrapper_address = get_varint(rec, c);
        r.dict_address = get_varint(rec, c);
        r.creation_stack_id = get_varint(rec, c);
        r.entries = get_varint(rec, c);
        r.module = get_string(rec, c);
        r.qualname = get_string(rec, c);
        r.creator_module = get_string(rec, c);
        r.creator_file = get_string(rec, c);
        r.creator_line = get_varint(rec, c);
        std::string names = get_string(rec, c);
        for (size_t start = 0; start < names.size();) {
            size_t end = names.find('\0', start);
            if (end == std::string::npos) end = names.size();
            if (end > start) r.bound_names.push_back(names.substr(start, end - start));
            start = end + 1;
        }
    return r;
}

CacheInsertRecord RecordDecoder::decode_cache_insert(const RawRecord& rec, Cursor& c) {
        require_thread(rec);
        CacheInsertRecord r;
        r.tid = tid_;
        r.ticks = ticks_ += static_cast<uint64_t>(get_svarint(rec, c));
        r.phase = get_varint(rec, c);
        r.cache_id = get_varint(rec, c);
        r.insert_seq = get_varint(rec, c);
        if (r.phase == CacheInsertRecord::Begin) {
            r.stack_id = get_varint(rec, c);
            r.entries_before = get_varint(rec, c);
            r.key_desc = get_string(rec, c);
            uint64_t n = get_varint(rec, c);
            if (n > c.remaining()) malformed(rec, "key type count exceeds record size");
            for (uint64_t i = 0; i < n; ++i) r.key_type_addresses.push_back(get_varint(rec, c));
        } else {
            r.value_type = get_string(rec, c);
        }
    return r;
}

TypeCreateRecord RecordDecoder::decode_type_create(const RawRecord& rec, Cursor& c) {
        require_thread(rec);
        TypeCreateRecord r;
        r.tid = tid_;
        r.ticks = ticks_ += static_cast<uint64_t>(get_svarint(rec, c));
        r.source = get_varint(rec, c);
        r.address = get_varint(rec, c);
        r.stack_id = get_varint(rec, c);
        r.module = get_string(rec, c);
        r.qualname = get_string(rec, c);
        r.metaclass = get_string(rec, c);
        // v2 appends 1 + the age of the allocation holding the class (0 = unknown).
        uint64_t holder;
        if (!c.at_end() && c.varint(holder) && holder && holder - 1 < compact_allocs_)
            r.allocation_seq = compact_allocs_ - (holder - 1);
    return r;
}

ContainerRecord RecordDecoder::decode_container(const RawRecord& rec, Cursor& c) {
        require_thread(rec);
        ContainerRecord r;
        r.tid = tid_;
        r.ticks = ticks_ += static_cast<uint64_t>(get_svarint(rec, c));
        std::vector<uint64_t> allocations(std::min<uint64_t>(get_varint(rec, c), 64));
        for (uint64_t& a : allocations) {
            const uint64_t holder = get_varint(rec, c);
            a = holder && holder - 1 < compact_allocs_ ? compact_allocs_ - (holder - 1) : 0;
        }
        auto allocation = [&](uint64_t index) { return index && index <= allocations.size() ? allocations[index - 1] : 0; };
        r.walk_seq = get_varint(rec, c);
        r.flags = get_varint(rec, c);
        r.walk_ns = get_varint(rec, c);
        r.container_id = get_varint(rec, c);
        r.kind = get_varint(rec, c);
        r.entries = get_varint(rec, c);
        r.table_allocation = allocation(get_varint(rec, c));
        r.name = get_string(rec, c);
        r.owner_type = get_string(rec, c);
        r.key_types = split_cmdline(get_string(rec, c));
        r.value_types = split_cmdline(get_string(rec, c));
        const uint64_t m = std::min<uint64_t>(get_varint(rec, c), 64);
        for (uint64_t i = 0; i < m; ++i)
            if (const uint64_t a = allocation(get_varint(rec, c))) r.entry_allocations.push_back(a);
    return r;
}

// The CPython agent's records (docs/cpython.md). CacheCreate, CacheInsert, TypeCreate,
// Collection and Container are thread events whose dticks move the run's clock.
bool RecordDecoder::decode_python_record(const RawRecord& rec, Cursor& c) {
    switch (static_cast<RecordKind>(rec.kind)) {
        default:
            return false;
        case RecordKind::CacheCreate:
            visitor_.on_cache_create(decode_cache_create(rec, c));
            return true;
        case RecordKind::CacheInsert:
            visitor_.on_cache_insert(decode_cache_insert(rec, c));
            return true;
        case RecordKind::TypeCreate:
            visitor_.on_type_create(decode_type_create(rec, c));
            return true;
        case RecordKind::Collection: {
            require_thread(rec);
            CollectionRecord r;
            r.tid = tid_;
            r.ticks = ticks_ += static_cast<uint64_t>(get_svarint(rec, c));
            r.phase = get_varint(rec, c);
            r.generation = get_varint(rec, c);
            r.flags = get_varint(rec, c);
            visitor_.on_collection(r);
            return true;
        }
        case RecordKind::Container:
            visitor_.on_container(decode_container(rec, c));
            return true;
        case RecordKind::CacheSize: {
            CacheSizeRecord r;
            r.ticks = get_varint(rec, c);
            uint64_t n = get_varint(rec, c);
            if (n > c.remaining() / 2) malformed(rec, "cache count exceeds record size");
            for (uint64_t i = 0; i < n; ++i) {
                uint64_t id = get_varint(rec, c);
                r.entries.emplace_back(id, get_svarint(rec, c));
            }
            visitor_.on_cache_size(r);
            return true;
        }
        case RecordKind::CacheMisses:
            visitor_.on_cache_misses(decode_cache_misses(rec, c));
            return true;
    }
}

ReadSummary read_trace(const std::string& path, RecordVisitor& visitor) {
    TraceReader reader(path);
    RecordDecoder decoder(visitor);
    ReadSummary summary;
    summary.version = reader.version();
    summary.file_size = reader.file_size();
    RawRecord rec;
    while (reader.next(rec)) {
        decoder.decode(rec);
        ++summary.records;
    }
    summary.blocks = reader.blocks_read();
    summary.ended_cleanly = decoder.saw_end();
    return summary;
}

}  // namespace growtrace
