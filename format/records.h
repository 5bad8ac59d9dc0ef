// Each record kind of the trace format, defined once: a plain struct of its fields and one field
// list, `fields(v, r)`, from which everything else follows (format/record_codec.h): the encoder
// (into a RecordEncoder or straight into a buffer), the decoder over a Cursor, the field names
// `growtrace dump` prints and the tests check docs/trace-format.md against. Adding or changing a
// field is done here, in the field list, and nowhere else.
//
// The structs hold what is on disk, no more: deltas stay deltas (`dticks`, `daddr`, `..._step`),
// strings are views (Bytes) into the record or into the writer's memory. Turning them into
// absolute ticks, addresses and allocation numbers is the reader's business (it owns the thread
// run's state), as is making them in the first place the writer's.
//
// Header-only and used inside the allocator hooks of the preload library: no allocation, no
// exceptions, no iostreams, no std::string or std::vector.
//
// The field list is a template over a visitor V, called with R = the struct or const struct.
// V provides:
//   varint(name, value, Shown)        unsigned LEB128
//   svarint(name, value)              zigzag-encoded signed LEB128
//   string(name, Bytes, Shown)        varint length + bytes
//   list(name, List<Item>, ListRule)  varint count, then count items, each Item::fields in order
//   trailing_varint / trailing_string(name, value, present)
//                                     a field appended later without a version change: present
//                                     when the record has bytes left for it
//   require(condition, why)           a rule on the values read so far (readers refuse the record)
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "format/trace_format.h"

namespace growtrace::format {

// A string field: a view, never owned.
struct Bytes {
    const uint8_t* data = nullptr;
    size_t size = 0;

    constexpr Bytes() = default;
    constexpr Bytes(const uint8_t* d, size_t n) : data(d), size(n) {}
    Bytes(const char* d, size_t n) : data(reinterpret_cast<const uint8_t*>(d)), size(n) {}
    // A C string without its terminator; null is the empty string.
    static Bytes of(const char* s) { return s ? Bytes(s, std::strlen(s)) : Bytes(); }

    const char* chars() const { return reinterpret_cast<const char*>(data); }
    friend bool operator==(Bytes a, Bytes b) {
        return a.size == b.size && (a.size == 0 || std::memcmp(a.data, b.data, a.size) == 0);
    }
};

// How a reader shows a field (`growtrace dump`); the bytes on disk do not depend on it.
enum class Shown : uint8_t { Number, Address, Text, RawBytes };

// What a reader checks of a list's count before it reads the items.
struct ListRule {
    // Every item takes at least this many bytes, so a count above remaining / min_item_bytes is
    // corrupt (refused with count_error before anything is reserved); 0: no such check.
    size_t min_item_bytes = 0;
    const char* count_error = nullptr;
    // Readers take at most this many items, whatever the count says (the writer never writes
    // more); 0: no cap.
    uint64_t max_items = 0;
};

// A list field. A writer gives its items as an array, or as a function that fills item i (when
// they live in some other shape, with no copy); a reader gets a view of the checked bytes, whose
// items are decoded again as it walks them (format/record_codec.h defines for_each).
template <class Item>
class List {
public:
    using Produce = void (*)(const void* context, size_t index, Item& out);

    constexpr List() = default;
    static constexpr List of(const Item* items, size_t count) {
        List l;
        l.items_ = items;
        l.count_ = count;
        return l;
    }
    static constexpr List produced(size_t count, const void* context, Produce produce) {
        List l;
        l.context_ = context;
        l.produce_ = produce;
        l.count_ = count;
        return l;
    }
    // The decoder's view: count items, already checked, in [begin, end).
    static constexpr List encoded(size_t count, const uint8_t* begin, const uint8_t* end) {
        List l;
        l.encoded_ = begin;
        l.encoded_end_ = end;
        l.count_ = count;
        return l;
    }

    constexpr size_t size() const { return count_; }
    constexpr bool empty() const { return count_ == 0; }
    template <class F>
    void for_each(F&& f) const;

private:
    const Item* items_ = nullptr;
    const void* context_ = nullptr;
    Produce produce_ = nullptr;
    const uint8_t* encoded_ = nullptr;
    const uint8_t* encoded_end_ = nullptr;
    size_t count_ = 0;
};

namespace records {

// --- the process, its modules, threads and stacks ---

// First record of every trace (docs/trace-format.md, "Process").
struct Process {
    static constexpr RecordKind kKind = RecordKind::Process;
    static constexpr const char* kName = "Process";
    uint64_t pid = 0, ppid = 0;
    uint64_t start_ticks = 0, start_monotonic_ns = 0, start_realtime_ns = 0;
    Bytes exe;
    Bytes cmdline;       // arguments joined by '\0'
    Bytes parent_trace;  // empty unless this trace was started by fork or exec
    // Appended without a version change: the launchers' command lines, arguments separated by
    // 0x1F, images by 0x1E.
    Bytes launchers;
    bool has_launchers = false;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("pid", r.pid, Shown::Number);
        v.varint("ppid", r.ppid, Shown::Number);
        v.varint("start_ticks", r.start_ticks, Shown::Number);
        v.varint("start_monotonic_ns", r.start_monotonic_ns, Shown::Number);
        v.varint("start_realtime_ns", r.start_realtime_ns, Shown::Number);
        v.string("exe", r.exe, Shown::Text);
        v.string("cmdline", r.cmdline, Shown::Text);
        v.string("parent_trace", r.parent_trace, Shown::Text);
        v.trailing_string("launchers", r.launchers, r.has_launchers);
    }
};

// An executable PT_LOAD segment, absolute addresses in the traced process.
struct Segment {
    uint64_t start = 0, size = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("start", r.start, Shown::Address);
        v.varint("size", r.size, Shown::Address);
    }
};

// A loaded object.
struct Module {
    static constexpr RecordKind kKind = RecordKind::Module;
    static constexpr const char* kName = "Module";
    uint64_t base = 0;  // load bias
    Bytes path;
    Bytes build_id;  // raw bytes of the GNU build-id note
    List<Segment> segments;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("base", r.base, Shown::Address);
        v.string("path", r.path, Shown::Text);
        v.string("build_id", r.build_id, Shown::RawBytes);
        v.list("segments", r.segments, ListRule{2, "segment count exceeds record size"});
    }
};

// The module list changed (dlclose): the modules that follow replace the set.
struct ModulesReset {
    static constexpr RecordKind kKind = RecordKind::ModulesReset;
    static constexpr const char* kName = "ModulesReset";
    uint64_t ticks = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("ticks", r.ticks, Shown::Number);
    }
};

// The event records that follow belong to this thread: a run, whose event ticks are deltas from
// base_ticks and addresses deltas from 0.
struct Thread {
    static constexpr RecordKind kKind = RecordKind::Thread;
    static constexpr const char* kName = "Thread";
    uint64_t tid = 0, base_ticks = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("tid", r.tid, Shown::Number);
        v.varint("base_ticks", r.base_ticks, Shown::Number);
    }
};

// A stack tree node. A native ip is a return address except for the innermost frame; a Python
// frame's ip is a PyFrame id with the tag bit kPythonFrameTag.
struct StackNode {
    static constexpr RecordKind kKind = RecordKind::StackNode;
    static constexpr const char* kName = "StackNode";
    uint64_t id = 0;
    uint64_t parent_id = 0;  // 0 = root
    uint64_t ip = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("id", r.id, Shown::Number);
        v.varint("parent_id", r.parent_id, Shown::Number);
        v.varint("ip", r.ip, Shown::Address);
    }
};

// A Python source location used in stacks.
struct PyFrame {
    static constexpr RecordKind kKind = RecordKind::PyFrame;
    static constexpr const char* kName = "PyFrame";
    uint64_t id = 0;
    Bytes file, function;
    uint64_t line = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("id", r.id, Shown::Number);
        v.string("file", r.file, Shown::Text);
        v.string("function", r.function, Shown::Text);
        v.varint("line", r.line, Shown::Number);
    }
};

struct ThreadName {
    static constexpr RecordKind kKind = RecordKind::ThreadName;
    static constexpr const char* kName = "ThreadName";
    uint64_t tid = 0;
    Bytes name;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("tid", r.tid, Shown::Number);
        v.string("name", r.name, Shown::Text);
    }
};

// --- thread events: Alloc and Free (version 1), Time, AllocCompact, FreeCompact (version 2) ---

// The run's clock moved by dticks.
struct Time {
    static constexpr RecordKind kKind = RecordKind::Time;
    static constexpr const char* kName = "Time";
    int64_t dticks = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.svarint("dticks", r.dticks);
    }
};

struct Alloc {
    static constexpr RecordKind kKind = RecordKind::Alloc;
    static constexpr const char* kName = "Alloc";
    int64_t dticks = 0;
    uint64_t size = 0;
    int64_t daddr = 0;
    uint64_t stack_id = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.svarint("dticks", r.dticks);
        v.varint("size", r.size, Shown::Number);
        v.svarint("daddr", r.daddr);
        v.varint("stack_id", r.stack_id, Shown::Number);
    }
};

struct Free {
    static constexpr RecordKind kKind = RecordKind::Free;
    static constexpr const char* kName = "Free";
    int64_t dticks = 0, daddr = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.svarint("dticks", r.dticks);
        v.svarint("daddr", r.daddr);
    }
};

// The n-th AllocCompact of the file (from 1) is allocation n.
struct AllocCompact {
    static constexpr RecordKind kKind = RecordKind::AllocCompact;
    static constexpr const char* kName = "AllocCompact";
    uint64_t size = 0, stack_id = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("size", r.size, Shown::Number);
        v.varint("stack_id", r.stack_id, Shown::Number);
    }
};

// Frees allocation n = (AllocCompact records so far) - age.
struct FreeCompact {
    static constexpr RecordKind kKind = RecordKind::FreeCompact;
    static constexpr const char* kName = "FreeCompact";
    uint64_t age = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("age", r.age, Shown::Number);
    }
};

// --- the writer's own records ---

// Periodic mark: one reading of ticks and CLOCK_MONOTONIC, and the resident set size.
struct TimeMark {
    static constexpr RecordKind kKind = RecordKind::TimeMark;
    static constexpr const char* kName = "TimeMark";
    uint64_t ticks = 0, monotonic_ns = 0, rss_bytes = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("ticks", r.ticks, Shown::Number);
        v.varint("monotonic_ns", r.monotonic_ns, Shown::Number);
        v.varint("rss_bytes", r.rss_bytes, Shown::Number);
    }
};

struct End {
    static constexpr RecordKind kKind = RecordKind::End;
    static constexpr const char* kName = "End";
    uint64_t ticks = 0, monotonic_ns = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("ticks", r.ticks, Shown::Number);
        v.varint("monotonic_ns", r.monotonic_ns, Shown::Number);
    }
};

// The process forked; the child traces to path.
struct Fork {
    static constexpr RecordKind kKind = RecordKind::Fork;
    static constexpr const char* kName = "Fork";
    uint64_t child_pid = 0;
    Bytes path;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("child_pid", r.child_pid, Shown::Number);
        v.string("path", r.path, Shown::Text);
    }
};

// The process is about to exec; the new image traces to path.
struct Exec {
    static constexpr RecordKind kKind = RecordKind::Exec;
    static constexpr const char* kName = "Exec";
    Bytes path;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.string("path", r.path, Shown::Text);
    }
};

struct TracerError {
    static constexpr RecordKind kKind = RecordKind::TracerError;
    static constexpr const char* kName = "TracerError";
    uint64_t ticks = 0;
    Bytes message;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("ticks", r.ticks, Shown::Number);
        v.string("message", r.message, Shown::Text);
    }
};

struct Exiting {
    static constexpr RecordKind kKind = RecordKind::Exiting;
    static constexpr const char* kName = "Exiting";
    uint64_t ticks = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("ticks", r.ticks, Shown::Number);
    }
};

// 0 = every allocation is recorded; N = sampled by bytes, N bytes between sample points on average.
struct Sampling {
    static constexpr RecordKind kKind = RecordKind::Sampling;
    static constexpr const char* kName = "Sampling";
    uint64_t mean_bytes_between_samples = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("mean_bytes_between_samples", r.mean_bytes_between_samples, Shown::Number);
    }
};

// What the hooks recorded, what the file holds and why they differ (docs/trace-format.md,
// "Ledger", gives each field's meaning).
struct Ledger {
    static constexpr RecordKind kKind = RecordKind::Ledger;
    static constexpr const char* kName = "Ledger";
    uint64_t allocations_recorded = 0, frees_recorded = 0;
    uint64_t allocations_written = 0, frees_written = 0;
    uint64_t live = 0, weightless = 0, untraced_frees = 0, inferred_frees = 0, lost_events = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("allocations_recorded", r.allocations_recorded, Shown::Number);
        v.varint("frees_recorded", r.frees_recorded, Shown::Number);
        v.varint("allocations_written", r.allocations_written, Shown::Number);
        v.varint("frees_written", r.frees_written, Shown::Number);
        v.varint("live", r.live, Shown::Number);
        v.varint("weightless", r.weightless, Shown::Number);
        v.varint("untraced_frees", r.untraced_frees, Shown::Number);
        v.varint("inferred_frees", r.inferred_frees, Shown::Number);
        v.varint("lost_events", r.lost_events, Shown::Number);
    }
};

// --- CPython records (docs/cpython.md). CacheCreate, CacheInsert, TypeCreate, Collection and
// Container are thread events: their leading dticks moves the run's clock. ---

struct CacheCreate {
    static constexpr RecordKind kKind = RecordKind::CacheCreate;
    static constexpr const char* kName = "CacheCreate";
    int64_t dticks = 0;
    uint64_t cache_id = 0;
    uint64_t flags = 0;  // GROWTRACE_PY_CACHE_* of contracts/growtrace_py_api.h
    int64_t maxsize = -1;  // -1 unbounded
    uint64_t wrapper_address = 0, dict_address = 0;
    uint64_t creation_stack_id = 0;  // 0 unknown
    uint64_t entries = 0;
    Bytes module, qualname;  // of the wrapped callable
    Bytes creator_module, creator_file;
    uint64_t creator_line = 0;
    Bytes bound_names;  // '\0'-separated

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.svarint("dticks", r.dticks);
        v.varint("cache_id", r.cache_id, Shown::Number);
        v.varint("flags", r.flags, Shown::Number);
        v.svarint("maxsize", r.maxsize);
        v.varint("wrapper_address", r.wrapper_address, Shown::Address);
        v.varint("dict_address", r.dict_address, Shown::Address);
        v.varint("creation_stack_id", r.creation_stack_id, Shown::Number);
        v.varint("entries", r.entries, Shown::Number);
        v.string("module", r.module, Shown::Text);
        v.string("qualname", r.qualname, Shown::Text);
        v.string("creator_module", r.creator_module, Shown::Text);
        v.string("creator_file", r.creator_file, Shown::Text);
        v.varint("creator_line", r.creator_line, Shown::Number);
        v.string("bound_names", r.bound_names, Shown::Text);
    }
};

struct KeyTypeAddress {
    uint64_t key_type_address = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("key_type_address", r.key_type_address, Shown::Address);
    }
};

// A miss of a cache: its begin (phase 0) and its end (1 stored, 2 raised). The allocations of the
// thread between the two are the memory computed for the entry.
struct CacheInsert {
    static constexpr RecordKind kKind = RecordKind::CacheInsert;
    static constexpr const char* kName = "CacheInsert";
    static constexpr uint64_t kBegin = 0;
    int64_t dticks = 0;
    uint64_t phase = kBegin;  // 0 begin, 1 stored, 2 raised
    uint64_t cache_id = 0, insert_seq = 0;
    // Phase 0 only.
    uint64_t stack_id = 0, entries_before = 0;
    Bytes key_desc;
    List<KeyTypeAddress> key_type_addresses;
    // Phases 1 and 2 only.
    Bytes value_type;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.svarint("dticks", r.dticks);
        v.varint("phase", r.phase, Shown::Number);
        v.varint("cache_id", r.cache_id, Shown::Number);
        v.varint("insert_seq", r.insert_seq, Shown::Number);
        if (r.phase == kBegin) {
            v.varint("stack_id", r.stack_id, Shown::Number);
            v.varint("entries_before", r.entries_before, Shown::Number);
            v.string("key_desc", r.key_desc, Shown::Text);
            v.list("key_type_addresses", r.key_type_addresses, ListRule{1, "key type count exceeds record size"});
        } else {
            v.string("value_type", r.value_type, Shown::Text);
        }
    }
};

// A class created at run time.
struct TypeCreate {
    static constexpr RecordKind kKind = RecordKind::TypeCreate;
    static constexpr const char* kName = "TypeCreate";
    int64_t dticks = 0;
    uint64_t source = 0;  // 0 PyType_Ready hook, 1 agent gc scan
    uint64_t address = 0;
    uint64_t stack_id = 0;  // 0: use the allocation at address
    Bytes module, qualname, metaclass;
    // Version 2: 1 + age (as in FreeCompact) of the AllocCompact holding the class object, 0 unknown.
    uint64_t type_allocation = 0;
    bool has_type_allocation = false;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.svarint("dticks", r.dticks);
        v.varint("source", r.source, Shown::Number);
        v.varint("address", r.address, Shown::Address);
        v.varint("stack_id", r.stack_id, Shown::Number);
        v.string("module", r.module, Shown::Text);
        v.string("qualname", r.qualname, Shown::Text);
        v.string("metaclass", r.metaclass, Shown::Text);
        v.trailing_varint("type_allocation", r.type_allocation, r.has_type_allocation);
    }
};

struct CacheEntries {
    uint64_t cache_id = 0;
    int64_t entries = 0;  // -1: the cache was destroyed

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("cache_id", r.cache_id, Shown::Number);
        v.svarint("entries", r.entries);
    }
};

// Entry counts of caches, sampled by the writer.
struct CacheSize {
    static constexpr RecordKind kKind = RecordKind::CacheSize;
    static constexpr const char* kName = "CacheSize";
    uint64_t ticks = 0;
    List<CacheEntries> caches;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("ticks", r.ticks, Shown::Number);
        v.list("caches", r.caches, ListRule{2, "cache count exceeds record size"});
    }
};

// Stack ids in increasing order, each written as the step from the previous one (the first from 0).
struct StackMisses {
    uint64_t stack_id_step = 0, misses = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("stack_id_step", r.stack_id_step, Shown::Number);
        v.varint("misses", r.misses, Shown::Number);
    }
};

struct CacheMissCount {
    uint64_t cache_id = 0, misses = 0, stored = 0;
    uint64_t first_ticks = 0;
    uint64_t last_ticks_step = 0;  // last_ticks - first_ticks
    uint64_t first_entries_before = 0, last_entries_after = 0;
    List<StackMisses> stacks;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("cache_id", r.cache_id, Shown::Number);
        v.varint("misses", r.misses, Shown::Number);
        v.varint("stored", r.stored, Shown::Number);
        v.varint("first_ticks", r.first_ticks, Shown::Number);
        v.varint("last_ticks_step", r.last_ticks_step, Shown::Number);
        v.varint("first_entries_before", r.first_entries_before, Shown::Number);
        v.varint("last_entries_after", r.last_entries_after, Shown::Number);
        v.list("stacks", r.stacks, ListRule{2, "stack count exceeds record size"});
    }
};

// Version 4, sampled traces: misses of caches with a maxsize, counted instead of written.
struct CacheMisses {
    static constexpr RecordKind kKind = RecordKind::CacheMisses;
    static constexpr const char* kName = "CacheMisses";
    uint64_t ticks = 0;
    List<CacheMissCount> caches;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("ticks", r.ticks, Shown::Number);
        v.list("caches", r.caches, ListRule{8, "cache count exceeds record size"});
    }
};

// A full collection of CPython's cyclic garbage collector starting or stopping.
struct Collection {
    static constexpr RecordKind kKind = RecordKind::Collection;
    static constexpr const char* kName = "Collection";
    int64_t dticks = 0;
    uint64_t phase = 0;  // 0 start, 1 stop
    uint64_t generation = 0;
    uint64_t flags = 0;  // 1: run by the agent at the shutdown mark

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.svarint("dticks", r.dticks);
        v.varint("phase", r.phase, Shown::Number);
        v.varint("generation", r.generation, Shown::Number);
        v.varint("flags", r.flags, Shown::Number);
    }
};

// 1 + age (as in FreeCompact) of a live allocation, 0 none traced.
struct ContainerAllocation {
    uint64_t allocation = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("allocation", r.allocation, Shown::Number);
    }
};

// 1-based index into the record's allocations.
struct ContainerEntry {
    uint64_t entry = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("entry", r.entry, Shown::Number);
    }
};

// One container as one walk of the agent found it (docs/containers.md). The writer writes at
// most 64 allocations and 64 entries; readers take no more.
struct Container {
    static constexpr RecordKind kKind = RecordKind::Container;
    static constexpr const char* kName = "Container";
    static constexpr uint64_t kMaxListed = 64;
    int64_t dticks = 0;
    List<ContainerAllocation> allocations;
    uint64_t walk_seq = 0;
    uint64_t flags = 0;  // 1 heap pass, 2 the final walk at the shutdown mark
    uint64_t walk_ns = 0, container_id = 0;
    uint64_t kind = 0;  // 1 dict, 2 list, 3 set, 4 deque, 5 WeakValueDictionary, 6 WeakKeyDictionary, 7 WeakSet
    uint64_t entries = 0;
    uint64_t table = 0;  // 1-based index into the allocations, 0 none
    Bytes name, owner_type;
    Bytes key_types, value_types;  // '\0'-separated type names of its newest entries
    List<ContainerEntry> newest_entries;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.svarint("dticks", r.dticks);
        v.list("allocations", r.allocations, ListRule{0, nullptr, kMaxListed});
        v.varint("walk_seq", r.walk_seq, Shown::Number);
        v.varint("flags", r.flags, Shown::Number);
        v.varint("walk_ns", r.walk_ns, Shown::Number);
        v.varint("container_id", r.container_id, Shown::Number);
        v.varint("kind", r.kind, Shown::Number);
        v.varint("entries", r.entries, Shown::Number);
        v.varint("table", r.table, Shown::Number);
        v.string("name", r.name, Shown::Text);
        v.string("owner_type", r.owner_type, Shown::Text);
        v.string("key_types", r.key_types, Shown::Text);
        v.string("value_types", r.value_types, Shown::Text);
        v.list("newest_entries", r.newest_entries, ListRule{0, nullptr, kMaxListed});
    }
};

// ShortLivedSamples: intervals, stack ids and sizes in increasing order, each written as the step
// from the previous one (the first from 0).
struct SizeCount {
    uint64_t size_step = 0, count = 0;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("size_step", r.size_step, Shown::Number);
        v.varint("count", r.count, Shown::Number);
    }
};

struct StackSizes {
    uint64_t stack_id_step = 0;
    List<SizeCount> sizes;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("stack_id_step", r.stack_id_step, Shown::Number);
        v.list("sizes", r.sizes, ListRule{2, "size count exceeds record size"});
    }
};

struct IntervalStacks {
    uint64_t interval_step = 0;
    List<StackSizes> stacks;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("interval_step", r.interval_step, Shown::Number);
        v.list("stacks", r.stacks, ListRule{2, "stack count exceeds record size"});
    }
};

// Version 6, sampled traces: samples allocated and freed within one interval of 2^shift ticks,
// counted instead of written. Interval i starts at first_ticks + i * 2^shift.
struct ShortLivedSamples {
    static constexpr RecordKind kKind = RecordKind::ShortLivedSamples;
    static constexpr const char* kName = "ShortLivedSamples";
    uint64_t last_ticks = 0;  // the latest of their frees
    uint64_t shift = 0;
    uint64_t first_ticks = 0;
    List<IntervalStacks> intervals;

    template <class V, class R>
    static constexpr void fields(V& v, R& r) {
        v.varint("last_ticks", r.last_ticks, Shown::Number);
        v.varint("shift", r.shift, Shown::Number);
        v.require(r.shift < 64, "interval shift of 64 bits or more");
        v.varint("first_ticks", r.first_ticks, Shown::Number);
        v.list("intervals", r.intervals, ListRule{2, "interval count exceeds record size"});
    }
};

// Every record kind with a definition, in the order of RecordKind.
template <class... Records>
struct KindList {
    // Calls f(static_cast<R*>(nullptr)) for each kind R.
    template <class F>
    static constexpr void each(F&& f) {
        (f(static_cast<Records*>(nullptr)), ...);
    }
    // Calls f(static_cast<R*>(nullptr)) for the kind whose value is `kind`; false when none is.
    template <class F>
    static constexpr bool with_kind(uint8_t kind, F&& f) {
        return ((static_cast<uint8_t>(Records::kKind) == kind ? (f(static_cast<Records*>(nullptr)), true) : false) || ...);
    }
};

using AllKinds = KindList<Process, Module, ModulesReset, Thread, StackNode, PyFrame, ThreadName, Time, Alloc, Free,
                          AllocCompact, FreeCompact, TimeMark, End, Fork, Exec, TracerError, Exiting, Sampling, Ledger,
                          CacheCreate, CacheInsert, TypeCreate, CacheSize, CacheMisses, Collection, Container,
                          ShortLivedSamples>;

}  // namespace records
}  // namespace growtrace::format
