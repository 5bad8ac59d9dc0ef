#include "analyzer/report/export_pprof.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "analyzer/report/protobuf_writer.h"

namespace growtrace {

namespace {

// Field numbers of profile.proto.
namespace pf {
constexpr uint32_t kSampleType = 1, kSample = 2, kMapping = 3, kLocation = 4, kFunction = 5, kStringTable = 6,
                   kTimeNanos = 9, kDurationNanos = 10, kPeriodType = 11, kPeriod = 12, kComment = 13,
                   kDefaultSampleType = 14;
}  // namespace pf
namespace value_type {
constexpr uint32_t kType = 1, kUnit = 2;
}
namespace sample {
constexpr uint32_t kLocationId = 1, kValue = 2, kLabel = 3;
}
namespace label {
constexpr uint32_t kKey = 1, kStr = 2, kNum = 3;
}
namespace mapping {
constexpr uint32_t kId = 1, kMemoryStart = 2, kMemoryLimit = 3, kFileOffset = 4, kFilename = 5, kBuildId = 6,
                   kHasFunctions = 7, kHasFilenames = 8, kHasLineNumbers = 9;
}
namespace location {
constexpr uint32_t kId = 1, kMappingId = 2, kAddress = 3, kLine = 4;
}
namespace line {
constexpr uint32_t kFunctionId = 1, kLine = 2;
}
namespace function {
constexpr uint32_t kId = 1, kName = 2, kSystemName = 3, kFilename = 4;
}

// The string table: index 0 is "", as the format requires.
class Strings {
public:
    Strings() { index(""); }
    int64_t index(const std::string& s) {
        auto [it, inserted] = ids_.try_emplace(s, static_cast<int64_t>(table_.size()));
        if (inserted) table_.push_back(s);
        return it->second;
    }
    const std::vector<std::string>& table() const { return table_; }

private:
    std::unordered_map<std::string, int64_t> ids_;
    std::vector<std::string> table_;
};

std::string hex(const std::string& raw) {
    std::string out;
    for (unsigned char c : raw) out += fmt::format("{:02x}", c);
    return out;
}

int64_t whole(double v) {
    if (!std::isfinite(v)) return 0;
    const double limit = static_cast<double>(std::numeric_limits<int64_t>::max());
    return static_cast<int64_t>(std::llround(std::clamp(v, -limit, limit)));
}

// Sample, mapping, location and function fields are appended as they are made; a message is
// the concatenation of its fields in any order, so finish() only puts the parts together.
class ProfileBuilder {
public:
    void add(size_t process, const AnalysisResult& r) {
        for (const ModuleRecord& m : r.modules) module_of_.try_emplace({process, m.path}, &m);
        // Readers take the first mapping for the program's own binary.
        if (module_of_.count({process, r.exe})) mapping_id(process, r.exe);
        for (const StackProfile& p : r.stack_profiles) add_sample(process, r, p);
        if (r.start_realtime_ns) {
            const uint64_t end = r.start_realtime_ns + static_cast<uint64_t>(std::max(0.0, r.duration_s) * 1e9);
            start_ns_ = start_ns_ ? std::min(start_ns_, r.start_realtime_ns) : r.start_realtime_ns;
            end_ns_ = std::max(end_ns_, end);
        }
        if (!period_) period_ = r.sample_period;
        comments_.push_back(fmt::format("growtrace: pid {}: {} ({})", r.pid, r.command,
                                        r.sample_period ? fmt::format("sampled, one sample per {} bytes on average",
                                                                      r.sample_period)
                                                        : std::string("every allocation")));
    }

    std::string finish() {
        proto::Writer head;
        value_type(head, pf::kSampleType, "inuse_space", "bytes");
        value_type(head, pf::kSampleType, "inuse_objects", "count");
        value_type(head, pf::kSampleType, "alloc_space", "bytes");
        value_type(head, pf::kSampleType, "alloc_objects", "count");
        value_type(head, pf::kSampleType, "growth", "bytes_per_second");
        proto::Writer tail;
        tail.int64(pf::kTimeNanos, static_cast<int64_t>(start_ns_));
        tail.int64(pf::kDurationNanos, static_cast<int64_t>(end_ns_ > start_ns_ ? end_ns_ - start_ns_ : 0));
        value_type(tail, pf::kPeriodType, "space", "bytes");
        if (period_) tail.int64(pf::kPeriod, static_cast<int64_t>(period_));
        for (const std::string& c : comments_) tail.int64(pf::kComment, strings_.index(c));
        tail.int64(pf::kDefaultSampleType, strings_.index("inuse_space"));
        // The string table goes last: every index is taken by then.
        for (const std::string& s : strings_.table()) tail.bytes(pf::kStringTable, s);
        return head.data() + samples_.data() + mappings_.data() + locations_.data() + functions_.data() + tail.data();
    }

private:
    void value_type(proto::Writer& to, uint32_t field, const char* type, const char* unit) {
        proto::Writer m;
        m.int64(value_type::kType, strings_.index(type));
        m.int64(value_type::kUnit, strings_.index(unit));
        to.message(field, m);
    }

    void add_sample(size_t process, const AnalysisResult& r, const StackProfile& p) {
        const std::vector<int64_t> values{whole(p.inuse_bytes), whole(p.inuse_objects), whole(p.alloc_bytes),
                                          whole(p.alloc_objects), whole(p.growth_bytes_per_s)};
        if (std::all_of(values.begin(), values.end(), [](int64_t v) { return v == 0; })) return;
        std::vector<uint64_t> locations;
        locations.reserve(p.frames.size());
        for (uint32_t f : p.frames) locations.push_back(location_id(process, f, r.profile_frames[f]));
        proto::Writer s, l;
        s.packed(sample::kLocationId, locations);
        s.packed(sample::kValue, values);
        auto string_label = [&](const char* key, const std::string& value) {
            l.clear();
            l.int64(label::kKey, strings_.index(key));
            l.int64(label::kStr, strings_.index(value));
            s.message(sample::kLabel, l);
        };
        string_label("verdict", p.verdict);
        if (!p.cache.empty()) string_label("cache", p.cache);
        l.clear();
        l.int64(label::kKey, strings_.index("pid"));
        l.int64(label::kNum, static_cast<int64_t>(r.pid));
        s.message(sample::kLabel, l);
        samples_.message(pf::kSample, s);
    }

    // One location per distinct frame of a process.
    uint64_t location_id(size_t process, uint32_t frame, const Frame& f) {
        auto [it, inserted] = locations_by_key_.try_emplace({process, frame}, locations_by_key_.size() + 1);
        if (!inserted) return it->second;
        const bool python = f.module_path == "python";
        const uint64_t mapping = mapping_id(process, f.module_path);
        // A Python frame has no machine address: its function, file and line say where it is.
        const uint64_t address = python ? 0 : f.ip;
        proto::Writer loc, ln;
        loc.uint64(location::kId, it->second);
        loc.uint64(location::kMappingId, mapping);
        if (address) loc.uint64(location::kAddress, address);
        ln.uint64(line::kFunctionId, function_id(f));
        if (f.line) ln.int64(line::kLine, f.line);
        loc.message(location::kLine, ln);
        locations_.message(pf::kLocation, loc);
        return it->second;
    }

    uint64_t function_id(const Frame& f) {
        const std::string name = f.function.empty() ? "??" : f.function;
        auto [it, inserted] = functions_by_key_.try_emplace({name, f.file}, functions_by_key_.size() + 1);
        if (!inserted) return it->second;
        proto::Writer fn;
        fn.uint64(function::kId, it->second);
        fn.int64(function::kName, strings_.index(name));
        fn.int64(function::kSystemName, strings_.index(name));
        fn.int64(function::kFilename, strings_.index(f.file));
        functions_.message(pf::kFunction, fn);
        return it->second;
    }

    // One mapping per module and process; [python] and [unknown] are shared by all processes.
    uint64_t mapping_id(size_t process, const std::string& module_path) {
        const bool python = module_path == "python";
        const bool unknown = module_path.empty();
        const size_t owner = python || unknown ? SIZE_MAX : process;
        const std::string name = python ? "[python]" : unknown ? "[unknown]" : module_path;
        auto [it, inserted] = mappings_by_key_.try_emplace({owner, name}, mappings_by_key_.size() + 1);
        if (!inserted) return it->second;
        proto::Writer m;
        m.uint64(mapping::kId, it->second);
        if (auto module = module_of_.find({process, module_path}); !python && !unknown && module != module_of_.end()) {
            const ModuleRecord& rec = *module->second;
            uint64_t start = rec.base, limit = rec.base;
            if (!rec.segments.empty()) {
                start = UINT64_MAX;
                for (const Segment& seg : rec.segments) {
                    start = std::min(start, seg.start);
                    limit = std::max(limit, seg.start + seg.size);
                }
            }
            m.uint64(mapping::kMemoryStart, start);
            m.uint64(mapping::kMemoryLimit, limit);
            // The executable segment's virtual address in the file, which the usual linker
            // layouts make equal to its file offset.
            m.uint64(mapping::kFileOffset, start - std::min(start, rec.base));
            if (!rec.build_id.empty()) m.int64(mapping::kBuildId, strings_.index(hex(rec.build_id)));
        }
        m.int64(mapping::kFilename, strings_.index(name));
        m.uint64(mapping::kHasFunctions, 1);
        m.uint64(mapping::kHasFilenames, 1);
        m.uint64(mapping::kHasLineNumbers, 1);
        mappings_.message(pf::kMapping, m);
        return it->second;
    }

    Strings strings_;
    proto::Writer samples_, mappings_, locations_, functions_;
    std::map<std::pair<size_t, std::string>, const ModuleRecord*> module_of_;
    std::map<std::pair<size_t, std::string>, uint64_t> mappings_by_key_;
    std::map<std::pair<size_t, uint32_t>, uint64_t> locations_by_key_;
    std::map<std::pair<std::string, std::string>, uint64_t> functions_by_key_;
    uint64_t start_ns_ = 0, end_ns_ = 0, period_ = 0;
    std::vector<std::string> comments_;
};

}  // namespace

std::string pprof_profile(const std::vector<const AnalysisResult*>& results) {
    ProfileBuilder builder;
    for (size_t i = 0; i < results.size(); ++i) builder.add(i, *results[i]);
    return builder.finish();
}

std::string gzip_compress(const std::string& data) {
    z_stream zs{};
    // 15 window bits, +16: a gzip header and trailer rather than zlib's.
    if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("zlib: deflateInit2 failed");
    std::string out(deflateBound(&zs, data.size()), '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    zs.avail_in = static_cast<uInt>(data.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    const int status = deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    if (status != Z_STREAM_END) throw std::runtime_error(fmt::format("zlib: deflate failed ({})", status));
    return out;
}

}  // namespace growtrace
