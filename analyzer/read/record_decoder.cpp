#include "analyzer/read/record_decoder.h"

#include <fmt/format.h>

#include "analyzer/read/trace_error.h"
#include "format/record_codec.h"

namespace growtrace {

namespace {

using format::Cursor;
using format::RecordKind;
namespace records = format::records;

[[noreturn]] void malformed(const RawRecord& rec, const char* what) {
    throw TraceError(fmt::format("corrupt trace: {}: {}", describe_position(rec), what));
}

// Reads a record of kind R through its definition (format/records.h); the definition's message
// says what was malformed.
template <class R>
R read(const RawRecord& rec, Cursor& c) {
    R r{};
    const char* why = nullptr;
    if (!format::decode(c, r, why)) malformed(rec, why);
    return r;
}

std::string text(format::Bytes b) { return b.size ? std::string(b.chars(), b.size) : std::string(); }

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

// '\0'-separated names, empty ones left out.
std::vector<std::string> split_names(const std::string& names) {
    std::vector<std::string> out;
    for (size_t start = 0; start < names.size();) {
        size_t end = names.find('\0', start);
        if (end == std::string::npos) end = names.size();
        if (end > start) out.push_back(names.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

CacheMissesRecord decode_cache_misses(const RawRecord& rec, Cursor& c) {
    const auto m = read<records::CacheMisses>(rec, c);
    CacheMissesRecord r;
    r.ticks = m.ticks;
    r.caches.reserve(m.caches.size());
    m.caches.for_each([&](const records::CacheMissCount& in) {
        CacheMissCounts out;
        out.cache_id = in.cache_id;
        out.misses = in.misses;
        out.stored = in.stored;
        out.first_ticks = in.first_ticks;
        out.last_ticks = in.first_ticks + in.last_ticks_step;
        out.first_entries_before = in.first_entries_before;
        out.last_entries_after = in.last_entries_after;
        uint64_t id = 0;  // stack ids are steps from the previous one
        in.stacks.for_each([&](const records::StackMisses& s) { out.stacks.emplace_back(id += s.stack_id_step, s.misses); });
        r.caches.push_back(std::move(out));
    });
    return r;
}

// Intervals, stacks and sizes are steps from the previous one; each group is one size of one
// stack in one interval.
ShortLivedSamplesRecord decode_short_lived(const RawRecord& rec, Cursor& c) {
    const auto s = read<records::ShortLivedSamples>(rec, c);
    ShortLivedSamplesRecord r;
    r.last_ticks = s.last_ticks;
    r.shift = s.shift;
    uint64_t interval = 0;
    s.intervals.for_each([&](const records::IntervalStacks& in) {
        const uint64_t ticks = s.first_ticks + ((interval += in.interval_step) << s.shift);
        uint64_t stack = 0;
        in.stacks.for_each([&](const records::StackSizes& st) {
            stack += st.stack_id_step;
            uint64_t size = 0;
            st.sizes.for_each([&](const records::SizeCount& z) {
                r.groups.push_back(ShortLivedGroup{ticks, stack, size += z.size_step, z.count});
            });
        });
    });
    return r;
}

ProcessRecord decode_process(const RawRecord& rec, Cursor& c) {
    const auto p = read<records::Process>(rec, c);
    ProcessRecord r;
    r.pid = p.pid;
    r.ppid = p.ppid;
    r.start_ticks = p.start_ticks;
    r.start_monotonic_ns = p.start_monotonic_ns;
    r.start_realtime_ns = p.start_realtime_ns;
    r.exe = text(p.exe);
    r.argv = split_cmdline(text(p.cmdline));
    r.parent_trace = text(p.parent_trace);
    return r;
}

ModuleRecord decode_module(const RawRecord& rec, Cursor& c) {
    const auto m = read<records::Module>(rec, c);
    ModuleRecord r;
    r.base = m.base;
    r.path = text(m.path);
    r.build_id = text(m.build_id);
    r.segments.reserve(m.segments.size());
    m.segments.for_each([&](const records::Segment& s) { r.segments.push_back(Segment{s.start, s.size}); });
    return r;
}

CacheSizeRecord decode_cache_size(const RawRecord& rec, Cursor& c) {
    const auto s = read<records::CacheSize>(rec, c);
    CacheSizeRecord r;
    r.ticks = s.ticks;
    s.caches.for_each([&](const records::CacheEntries& e) { r.entries.emplace_back(e.cache_id, e.entries); });
    return r;
}

}  // namespace

void RecordDecoder::require_thread(const RawRecord& rec) const {
    if (!in_run_) malformed(rec, "event before any Thread record");
}

// The run's clock moved by a thread event's dticks (unsigned wrap-around arithmetic: a corrupt
// delta gives a strange value, never UB); returns the new ticks.
uint64_t RecordDecoder::advance_clock(int64_t dticks) {
    return ticks_ += static_cast<uint64_t>(dticks);
}

// The allocation a writer names by 1 + its age (TypeCreate, Container); 0 none or unknown.
uint64_t RecordDecoder::allocation_named(uint64_t holder) const {
    return holder && holder - 1 < compact_allocs_ ? compact_allocs_ - (holder - 1) : 0;
}

void RecordDecoder::decode_alloc(const RawRecord& rec, Cursor& c) {
    require_thread(rec);
    const auto a = read<records::Alloc>(rec, c);
    AllocEvent e;
    e.tid = tid_;
    e.ticks = advance_clock(a.dticks);
    e.size = a.size;
    e.addr = addr_ += static_cast<uint64_t>(a.daddr);
    e.stack_id = a.stack_id;
    visitor_.on_alloc(e);
}

void RecordDecoder::decode_free(const RawRecord& rec, Cursor& c) {
    require_thread(rec);
    const auto f = read<records::Free>(rec, c);
    FreeEvent e;
    e.tid = tid_;
    e.ticks = advance_clock(f.dticks);
    e.addr = addr_ += static_cast<uint64_t>(f.daddr);
    visitor_.on_free(e);
}

// Version 2 thread events. Time moves the run's clock; compact events happen at the run's
// current ticks. Returns false if rec is not one of them.
bool RecordDecoder::decode_v2_event(const RawRecord& rec, Cursor& c) {
    switch (rec.kind) {
        case kKindTime:
            require_thread(rec);
            visitor_.on_run_time(tid_, advance_clock(read<records::Time>(rec, c).dticks));
            return true;
        case kKindAllocCompact: {
            require_thread(rec);
            const auto a = read<records::AllocCompact>(rec, c);
            visitor_.on_alloc_compact(AllocCompactEvent{tid_, ticks_, a.size, a.stack_id, ++compact_allocs_});
            return true;
        }
        case kKindFreeCompact: {
            require_thread(rec);
            const uint64_t age = read<records::FreeCompact>(rec, c).age;
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
    if (decode_v2_event(rec, c) || decode_process_record(rec, c) || decode_trace_mark(rec, c) ||
        decode_python_record(rec, c))
        return;
    visitor_.on_unknown(rec);
}

// A Thread record starts a run: the events after it are that thread's, their clock and
// addresses deltas from its base.
ThreadRecord RecordDecoder::enter_run(const RawRecord& rec, Cursor& c) {
    const auto r = read<records::Thread>(rec, c);
    in_run_ = true;
    tid_ = r.tid;
    ticks_ = r.base_ticks;
    addr_ = 0;
    return r;
}

// The process, its modules, threads and stacks, and the v1 events.
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
            visitor_.on_modules_reset(read<records::ModulesReset>(rec, c));
            return true;
        case RecordKind::Thread:
            visitor_.on_thread(enter_run(rec, c));
            return true;
        case RecordKind::StackNode: {
            const auto n = read<records::StackNode>(rec, c);
            visitor_.on_stack_node(StackNodeRecord{n.id, n.parent_id, n.ip});
            return true;
        }
        case RecordKind::PyFrame: {
            const auto f = read<records::PyFrame>(rec, c);
            visitor_.on_py_frame(PyFrameRecord{f.id, text(f.file), text(f.function), f.line});
            return true;
        }
        case RecordKind::ThreadName: {
            const auto n = read<records::ThreadName>(rec, c);
            visitor_.on_thread_name(ThreadNameRecord{n.tid, text(n.name)});
            return true;
        }
        case RecordKind::Alloc: decode_alloc(rec, c); return true;
        case RecordKind::Free: decode_free(rec, c); return true;
        case RecordKind::Fork: {
            const auto f = read<records::Fork>(rec, c);
            visitor_.on_fork(ForkRecord{f.child_pid, text(f.path)});
            return true;
        }
        case RecordKind::Exec:
            visitor_.on_exec(ExecRecord{text(read<records::Exec>(rec, c).path)});
            return true;
    }
}

// The trace's own marks: time, end, errors, exit, sampling, ledger, counted samples.
bool RecordDecoder::decode_trace_mark(const RawRecord& rec, Cursor& c) {
    switch (static_cast<RecordKind>(rec.kind)) {
        default:
            return false;
        case RecordKind::TimeMark:
            visitor_.on_time_mark(read<records::TimeMark>(rec, c));
            return true;
        case RecordKind::End: {
            const auto end = read<records::End>(rec, c);
            saw_end_ = true;
            visitor_.on_end(end);
            return true;
        }
        case RecordKind::TracerError: {
            const auto e = read<records::TracerError>(rec, c);
            visitor_.on_tracer_error(TracerErrorRecord{e.ticks, text(e.message)});
            return true;
        }
        case RecordKind::Exiting:
            visitor_.on_exiting(read<records::Exiting>(rec, c).ticks);
            return true;
        case RecordKind::Sampling:
            visitor_.on_sampling(read<records::Sampling>(rec, c).mean_bytes_between_samples);
            return true;
        case RecordKind::Ledger:
            visitor_.on_ledger(read<records::Ledger>(rec, c));
            return true;
        case RecordKind::ShortLivedSamples:
            visitor_.on_short_lived_samples(decode_short_lived(rec, c));
            return true;
    }
}

CacheCreateRecord RecordDecoder::decode_cache_create(const RawRecord& rec, Cursor& c) {
    require_thread(rec);
    const auto in = read<records::CacheCreate>(rec, c);
    CacheCreateRecord r;
    r.tid = tid_;
    r.ticks = advance_clock(in.dticks);
    r.cache_id = in.cache_id;
    r.flags = in.flags;
    r.maxsize = in.maxsize;
    r.wrapper_address = in.wrapper_address;
    r.dict_address = in.dict_address;
    r.creation_stack_id = in.creation_stack_id;
    r.entries = in.entries;
    r.module = text(in.module);
    r.qualname = text(in.qualname);
    r.creator_module = text(in.creator_module);
    r.creator_file = text(in.creator_file);
    r.creator_line = in.creator_line;
    r.bound_names = split_names(text(in.bound_names));
    return r;
}

CacheInsertRecord RecordDecoder::decode_cache_insert(const RawRecord& rec, Cursor& c) {
    require_thread(rec);
    const auto in = read<records::CacheInsert>(rec, c);
    CacheInsertRecord r;
    r.tid = tid_;
    r.ticks = advance_clock(in.dticks);
    r.phase = in.phase;
    r.cache_id = in.cache_id;
    r.insert_seq = in.insert_seq;
    r.stack_id = in.stack_id;
    r.entries_before = in.entries_before;
    r.key_desc = text(in.key_desc);
    in.key_type_addresses.for_each(
        [&](const records::KeyTypeAddress& k) { r.key_type_addresses.push_back(k.key_type_address); });
    r.value_type = text(in.value_type);
    return r;
}

TypeCreateRecord RecordDecoder::decode_type_create(const RawRecord& rec, Cursor& c) {
    require_thread(rec);
    const auto in = read<records::TypeCreate>(rec, c);
    TypeCreateRecord r;
    r.tid = tid_;
    r.ticks = advance_clock(in.dticks);
    r.source = in.source;
    r.address = in.address;
    r.stack_id = in.stack_id;
    r.module = text(in.module);
    r.qualname = text(in.qualname);
    r.metaclass = text(in.metaclass);
    if (in.has_type_allocation) r.allocation_seq = allocation_named(in.type_allocation);
    return r;
}

ContainerRecord RecordDecoder::decode_container(const RawRecord& rec, Cursor& c) {
    require_thread(rec);
    const auto in = read<records::Container>(rec, c);
    ContainerRecord r;
    r.tid = tid_;
    r.ticks = advance_clock(in.dticks);
    std::vector<uint64_t> allocations;
    in.allocations.for_each(
        [&](const records::ContainerAllocation& a) { allocations.push_back(allocation_named(a.allocation)); });
    auto allocation = [&](uint64_t index) { return index && index <= allocations.size() ? allocations[index - 1] : 0; };
    r.walk_seq = in.walk_seq;
    r.flags = in.flags;
    r.walk_ns = in.walk_ns;
    r.container_id = in.container_id;
    r.kind = in.kind;
    r.entries = in.entries;
    r.table_allocation = allocation(in.table);
    r.name = text(in.name);
    r.owner_type = text(in.owner_type);
    r.key_types = split_cmdline(text(in.key_types));
    r.value_types = split_cmdline(text(in.value_types));
    in.newest_entries.for_each([&](const records::ContainerEntry& e) {
        if (const uint64_t a = allocation(e.entry)) r.entry_allocations.push_back(a);
    });
    return r;
}

CollectionRecord RecordDecoder::decode_collection(const RawRecord& rec, Cursor& c) {
    require_thread(rec);
    const auto in = read<records::Collection>(rec, c);
    return CollectionRecord{tid_, advance_clock(in.dticks), in.phase, in.generation, in.flags};
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
        case RecordKind::Collection:
            visitor_.on_collection(decode_collection(rec, c));
            return true;
        case RecordKind::Container:
            visitor_.on_container(decode_container(rec, c));
            return true;
        case RecordKind::CacheSize:
            visitor_.on_cache_size(decode_cache_size(rec, c));
            return true;
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
