#include "analyzer/model/symbolizer.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace growtrace {

struct Symbolizer::Module {
    ModuleRecord record;
    uint32_t generation = 0;
    bool tried_open = false;
    Dwfl* dwfl = nullptr;  // one session per module: modules of different generations may overlap
    Dwfl_Module* mod = nullptr;
    // Its function symbols by address, read the first time a frame in it has no symbol of its
    // own (a stripped library's internal functions): the nearest one below names the frame.
    bool functions_read = false;
    std::vector<std::pair<uint64_t, std::string>> functions;

    bool covers(uint64_t ip) const {
        for (const Segment& s : record.segments)
            if (ip >= s.start && ip - s.start < s.size) return true;
        return false;
    }
};

namespace {

const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

std::string demangle(const char* name) {
    int status = 0;
    char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status != 0 || !out) return name;
    std::string result(out);
    std::free(out);
    return result;
}

std::string hex_bytes(const std::string& bytes) {
    std::string out;
    for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
    return out;
}

}  // namespace

std::string path_basename(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

Symbolizer::Symbolizer() = default;

Symbolizer::~Symbolizer() {
    for (auto& m : modules_)
        if (m->dwfl) dwfl_end(m->dwfl);
}

void Symbolizer::add_module(const ModuleRecord& module, uint32_t generation) {
    std::string identity = fmt::format("{}|{:x}|{}", module.path, module.base, hex_bytes(module.build_id));
    for (const Segment& s : module.segments) identity += fmt::format("|{:x}+{:x}", s.start, s.size);
    auto it = by_identity_.find(identity);
    if (it != by_identity_.end()) {
        // Still loaded in the new generation: let it serve that generation too.
        it->second->generation = std::max(it->second->generation, generation);
        return;
    }
    auto m = std::make_unique<Module>();
    m->record = module;
    m->generation = generation;
    by_identity_.emplace(std::move(identity), m.get());
    modules_.push_back(std::move(m));
}

Symbolizer::Module* Symbolizer::find_module(uint64_t ip, uint32_t generation) {
    Module* best = nullptr;   // newest generation <= requested
    Module* later = nullptr;  // else the oldest newer one
    for (auto& m : modules_) {
        if (!m->covers(ip)) continue;
        if (m->generation <= generation) {
            if (!best || m->generation >= best->generation) best = m.get();
        } else if (!later || m->generation < later->generation) {
            later = m.get();
        }
    }
    return best ? best : later;
}

bool Symbolizer::open_module(Module& m) {
    if (m.tried_open) return m.mod != nullptr;
    m.tried_open = true;
    m.dwfl = dwfl_begin(&kOfflineCallbacks);
    if (!m.dwfl) return false;
    dwfl_report_begin(m.dwfl);
    m.mod = dwfl_report_elf(m.dwfl, path_basename(m.record.path).c_str(), m.record.path.c_str(), -1,
                            m.record.base, false);
    dwfl_report_end(m.dwfl, nullptr, nullptr);
    if (!m.mod) {
        warnings_.push_back(fmt::format("cannot read module {} for symbols ({}); its frames are shown as ??",
                                        m.record.path, dwfl_errmsg(-1)));
        return false;
    }
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr = 0;
    const int len = dwfl_module_build_id(m.mod, &bits, &vaddr);
    if (len > 0 && !m.record.build_id.empty() &&
        (static_cast<size_t>(len) != m.record.build_id.size() ||
         std::memcmp(bits, m.record.build_id.data(), m.record.build_id.size()) != 0)) {
        warnings_.push_back(fmt::format("module {} has changed since the trace was recorded (build id differs); "
                                        "its symbols may be wrong",
                                        m.record.path));
    }
    return true;
}

Frame Symbolizer::resolve(uint64_t ip, uint64_t lookup, Module* m) {
    Frame f;
    f.ip = ip;
    if (!m) {
        f.function = fmt::format("0x{:x}", ip);
        return f;
    }
    f.module_path = m->record.path;
    f.function = "??";
    if (!open_module(*m)) return f;
    GElf_Off offset = 0;
    GElf_Sym sym;
    if (const char* name = dwfl_module_addrinfo(m->mod, lookup, &offset, &sym, nullptr, nullptr, nullptr))
        f.function = demangle(name);
    else
        f.function = nearest_function_name(*m, ip, lookup);
    if (Dwfl_Line* line = dwfl_module_getsrc(m->mod, lookup)) {
        int lineno = 0;
        if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
            f.file = file;
            f.line = lineno > 0 ? static_cast<uint32_t>(lineno) : 0;
        }
    }
    return f;
}

// A frame no symbol covers (a function of a stripped library that only exports its interface)
// is named after the nearest function symbol below it, "name+0xoffset" as eu-addr2line and perf
// write it, or after the module when none is below: never a bare "??", which would make every
// such frame look alike.
std::string Symbolizer::nearest_function_name(Module& m, uint64_t ip, uint64_t lookup) {
    if (!m.functions_read) {
        m.functions_read = true;
        const int count = dwfl_module_getsymtab(m.mod);
        for (int i = 1; i < count; ++i) {
            GElf_Sym sym;
            GElf_Addr address = 0;
            const char* name = dwfl_module_getsym_info(m.mod, i, &sym, &address, nullptr, nullptr, nullptr);
            if (name && *name && GELF_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_shndx != SHN_UNDEF)
                m.functions.emplace_back(address, name);
        }
        std::sort(m.functions.begin(), m.functions.end());
    }
    auto above = std::upper_bound(m.functions.begin(), m.functions.end(), lookup,
                                  [](uint64_t a, const auto& fn) { return a < fn.first; });
    if (above == m.functions.begin()) return fmt::format("{}+0x{:x}", path_basename(m.record.path), ip - m.record.base);
    const auto& [address, name] = *std::prev(above);
    return fmt::format("{}+0x{:x}", demangle(name.c_str()), ip - address);
}

const Frame& Symbolizer::symbolize(uint64_t ip, bool return_address, uint32_t generation) {
    // A return address points after the call; ip - 1 is inside the call instruction, hence on
    // the caller's line (and in the caller's function, even for a noreturn callee at the end).
    const uint64_t lookup = return_address && ip > 0 ? ip - 1 : ip;
    Module* m = find_module(lookup, generation);
    const uint64_t key = lookup * 1000003u ^ reinterpret_cast<uintptr_t>(m);
    auto it = cache_.find(key);
    if (it != cache_.end() && it->second.ip == ip) return it->second;
    Frame f = resolve(ip, lookup, m);
    return cache_.insert_or_assign(key, std::move(f)).first->second;
}

std::vector<std::string> Symbolizer::take_warnings() {
    std::vector<std::string> out;
    out.swap(warnings_);
    return out;
}

}  // namespace growtrace
