#include "analyzer/report/dump.h"

#include <fmt/format.h>

#include "analyzer/read/record_decoder.h"
#include "analyzer/read/trace_reader.h"
#include "format/record_codec.h"

namespace growtrace {

namespace {

namespace records = format::records;

std::string quoted(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') out += fmt::format("\\{}", static_cast<char>(c));
        else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
    return out + "\"";
}

std::string quoted_list(const std::vector<std::string>& items) {
    std::vector<std::string> out;
    for (const std::string& i : items) out.push_back(quoted(i));
    return fmt::format("{}", fmt::join(out, " "));
}

std::string hex(std::string_view bytes) {
    std::string out;
    for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
    return out.empty() ? "-" : out;
}

// Prints a record's fields as ` name=value`, named and shown as its definition says: numbers in
// decimal, addresses in hex, text quoted, raw bytes in hex.
class FieldPrinter {
public:
    void varint(const char* name, uint64_t v, format::Shown shown) {
        out += shown == format::Shown::Address ? fmt::format(" {}=0x{:x}", name, v) : fmt::format(" {}={}", name, v);
    }
    void svarint(const char* name, int64_t v) { out += fmt::format(" {}={}", name, v); }
    void string(const char* name, format::Bytes b, format::Shown shown) {
        const std::string_view bytes(b.size ? b.chars() : "", b.size);
        out += fmt::format(" {}={}", name, shown == format::Shown::RawBytes ? hex(bytes) : quoted(bytes));
    }
    template <class Item>
    void list(const char* name, const format::List<Item>& items, const format::ListRule&) {
        out += fmt::format(" {}=[", name);
        items.for_each([this](const Item& item) {
            out += " {";
            Item::fields(*this, item);
            out += " }";
        });
        out += " ]";
    }
    void trailing_varint(const char* name, uint64_t v, bool present) {
        if (present) varint(name, v, format::Shown::Number);
    }
    void trailing_string(const char* name, format::Bytes b, bool present) {
        if (present) string(name, b, format::Shown::Text);
    }
    void require(bool, const char*) {}

    std::string out;
};

// The kinds whose dump line is their fields as they are on disk, printed from their definitions.
// The others show what the reader made of them (absolute ticks and addresses, allocation
// numbers, argv, ...), through the visitor's typed callbacks.
using PrintedAsWritten = records::KindList<records::ModulesReset, records::Thread, records::PyFrame, records::ThreadName,
                                           records::TimeMark, records::End, records::Fork, records::Exec,
                                           records::TracerError, records::Exiting, records::Ledger>;

// The record's line, or nothing when its payload is malformed (the decoder then reports it).
std::string printed_as_written(const RawRecord& raw) {
    std::string line;
    PrintedAsWritten::with_kind(raw.kind, [&](auto* kind) {
        using R = std::remove_pointer_t<decltype(kind)>;
        format::Cursor c(raw.data, raw.data + raw.size);
        R r{};
        if (!format::decode(c, r)) return;
        FieldPrinter printer;
        R::fields(printer, r);
        line = R::kName + printer.out;
    });
    return line;
}

class DumpVisitor : public RecordVisitor {
public:
    explicit DumpVisitor(std::ostream& out) : out_(out) {}

    void on_record(const RawRecord& r) override {
        prefix_ = fmt::format("  +{:<8} ", r.record_offset);
        if (std::string printed = printed_as_written(r); !printed.empty()) line(printed);
    }
    void on_process(const ProcessRecord& r) override {
        std::string argv;
        for (const auto& a : r.argv) argv += (argv.empty() ? "" : " ") + quoted(a);
        line(fmt::format("Process pid={} ppid={} start_ticks={} start_monotonic_ns={} start_realtime_ns={} exe={} "
                         "argv=[{}] parent_trace={}",
                         r.pid, r.ppid, r.start_ticks, r.start_monotonic_ns, r.start_realtime_ns, quoted(r.exe), argv,
                         quoted(r.parent_trace)));
    }
    void on_module(const ModuleRecord& r) override {
        std::string segs;
        for (const auto& s : r.segments) segs += fmt::format(" [0x{:x}+0x{:x}]", s.start, s.size);
        line(fmt::format("Module base=0x{:x} path={} build_id={} segments={}{}", r.base, quoted(r.path), hex(r.build_id),
                         r.segments.size(), segs));
    }
    void on_stack_node(const StackNodeRecord& r) override {
        if (r.ip & format::kPythonFrameTag)
            line(fmt::format("StackNode id={} parent={} python_frame={}", r.id, r.parent, r.ip & ~format::kPythonFrameTag));
        else
            line(fmt::format("StackNode id={} parent={} ip=0x{:x}", r.id, r.parent, r.ip));
    }
    void on_alloc(const AllocEvent& e) override {
        line(fmt::format("Alloc tid={} ticks={} size={} addr=0x{:x} stack={}", e.tid, e.ticks, e.size, e.addr, e.stack_id));
    }
    void on_free(const FreeEvent& e) override { line(fmt::format("Free tid={} ticks={} addr=0x{:x}", e.tid, e.ticks, e.addr)); }
    void on_run_time(uint64_t tid, uint64_t ticks) override { line(fmt::format("Time tid={} ticks={}", tid, ticks)); }
    void on_alloc_compact(const AllocCompactEvent& e) override {
        line(fmt::format("AllocCompact tid={} ticks={} size={} stack={} allocation={}", e.tid, e.ticks, e.size, e.stack_id,
                         e.seq));
    }
    void on_free_compact(const FreeCompactEvent& e) override {
        line(fmt::format("FreeCompact tid={} ticks={} allocation={}", e.tid, e.ticks, e.seq));
    }
    void on_short_lived_samples(const ShortLivedSamplesRecord& r) override {
        std::vector<std::string> groups;
        for (const ShortLivedGroup& g : r.groups)
            groups.push_back(fmt::format("{}:stack={},size={}x{}", g.ticks, g.stack_id, g.size, g.count));
        line(fmt::format("ShortLivedSamples last_ticks={} interval={} ticks [{}]", r.last_ticks, uint64_t{1} << r.shift,
                         fmt::join(groups, " ")));
    }
    void on_sampling(uint64_t mean_bytes) override {
        line(mean_bytes ? fmt::format("Sampling mean_bytes={} (every allocation record is a sample)", mean_bytes)
                        : std::string("Sampling mean_bytes=0 (every allocation)"));
    }
    void on_cache_create(const CacheCreateRecord& r) override {
        line(fmt::format("CacheCreate tid={} ticks={} cache={} flags={} maxsize={} wrapper=0x{:x} dict=0x{:x} "
                         "stack={} entries={} callable={} creator={}:{} ({}) names=[{}]",
                         r.tid, r.ticks, r.cache_id, r.flags, r.maxsize, r.wrapper_address, r.dict_address,
                         r.creation_stack_id, r.entries, quoted(r.module + "." + r.qualname), quoted(r.creator_file),
                         r.creator_line, quoted(r.creator_module), quoted_list(r.bound_names)));
    }
    void on_cache_insert(const CacheInsertRecord& r) override {
        if (r.phase == CacheInsertRecord::Begin) {
            std::vector<std::string> types;
            for (uint64_t a : r.key_type_addresses) types.push_back(fmt::format("0x{:x}", a));
            line(fmt::format("CacheInsert tid={} ticks={} cache={} seq={} begin stack={} entries_before={} key={} "
                             "key_types=[{}]",
                             r.tid, r.ticks, r.cache_id, r.insert_seq, r.stack_id, r.entries_before, quoted(r.key_desc),
                             fmt::join(types, " ")));
        } else {
            line(fmt::format("CacheInsert tid={} ticks={} cache={} seq={} {} value_type={}", r.tid, r.ticks, r.cache_id,
                             r.insert_seq, r.phase == CacheInsertRecord::Stored ? "stored" : "raised",
                             quoted(r.value_type)));
        }
    }
    void on_cache_size(const CacheSizeRecord& r) override {
        std::vector<std::string> sizes;
        for (const auto& [id, entries] : r.entries) sizes.push_back(fmt::format("{}:{}", id, entries));
        line(fmt::format("CacheSize ticks={} [{}]", r.ticks, fmt::join(sizes, " ")));
    }
    void on_cache_misses(const CacheMissesRecord& r) override {
        std::vector<std::string> caches;
        for (const CacheMissCounts& m : r.caches) {
            std::vector<std::string> stacks;
            for (const auto& [id, n] : m.stacks) stacks.push_back(fmt::format("{}x{}", id, n));
            caches.push_back(fmt::format("{}:misses={},stored={},ticks={}..{},entries={}..{},stacks=[{}]", m.cache_id,
                                         m.misses, m.stored, m.first_ticks, m.last_ticks, m.first_entries_before,
                                         m.last_entries_after, fmt::join(stacks, " ")));
        }
        line(fmt::format("CacheMisses ticks={} [{}]", r.ticks, fmt::join(caches, " ")));
    }
    void on_type_create(const TypeCreateRecord& r) override {
        line(fmt::format("TypeCreate tid={} ticks={} source={} address=0x{:x} stack={} class={} metaclass={} "
                         "allocation={}",
                         r.tid, r.ticks, r.source == 0 ? "type_ready" : "gc_scan", r.address, r.stack_id,
                         quoted(r.module + "." + r.qualname), quoted(r.metaclass), r.allocation_seq));
    }
    void on_collection(const CollectionRecord& r) override {
        line(fmt::format("Collection tid={} ticks={} {} generation={}{}", r.tid, r.ticks,
                         r.phase == CollectionRecord::Start ? "start" : "stop", r.generation,
                         r.flags & CollectionRecord::AtShutdown ? " at_shutdown" : ""));
    }
    void on_container(const ContainerRecord& r) override {
        line(fmt::format("Container tid={} ticks={} walk={} flags={} walk_ns={} id={} kind={} entries={} name={} owner={} "
                         "keys=[{}] values=[{}] table={} entries_at=[{}]",
                         r.tid, r.ticks, r.walk_seq, r.flags, r.walk_ns, r.container_id, r.kind, r.entries,
                         quoted(r.name), quoted(r.owner_type), fmt::join(r.key_types, " "),
                         fmt::join(r.value_types, " "), r.table_allocation, fmt::join(r.entry_allocations, " ")));
    }
    void on_unknown(const RawRecord& r) override {
        line(fmt::format("{} (not decoded) length={}", record_kind_name(r.kind), r.size));
    }

private:
    void line(const std::string& text) { out_ << prefix_ << text << '\n'; }

    std::ostream& out_;
    std::string prefix_;
};

const char* codec_name(uint8_t codec) {
    switch (static_cast<format::Codec>(codec)) {
        case format::Codec::Raw: return "raw";
        case format::Codec::Zstd: return "zstd";
        case format::Codec::ZstdWithPrefix: return "zstd (prefix: the block before)";
    }
    return "?";
}

}  // namespace

void dump_trace(const std::string& path, std::ostream& out) {
    TraceReader reader(path);
    out << fmt::format("trace {}: format version {}, {} bytes\n", path, reader.version(), reader.file_size());
    DumpVisitor visitor(out);
    RecordDecoder decoder(visitor);
    RawRecord rec;
    while (reader.next(rec)) {
        if (reader.first_in_block()) {
            const BlockInfo& b = reader.block();
            out << fmt::format("block {} at offset {}: codec {}, stored {} bytes, raw {} bytes\n", b.index, b.offset,
                               codec_name(b.codec), b.stored_size, b.raw_size);
        }
        decoder.decode(rec);
    }
    out << fmt::format("{} blocks; {}\n", reader.blocks_read(),
                       decoder.saw_end() ? "ended cleanly" : "no End record (process killed or still running)");
}

}  // namespace growtrace
