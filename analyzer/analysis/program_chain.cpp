#include "analyzer/analysis/program_chain.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "analyzer/read/record_decoder.h"
#include "analyzer/read/trace_error.h"
#include "analyzer/read/trace_reader.h"
#include "contracts/environment.h"
#include "format/record_codec.h"

namespace growtrace {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> split(std::string_view text, char separator) {
    std::vector<std::string> parts;
    if (text.empty()) return parts;
    size_t start = 0;
    while (true) {
        size_t end = text.find(separator, start);
        parts.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    return parts;
}

std::string_view base_name(std::string_view path) {
    size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view text(format::Bytes b) { return b.size ? std::string_view(b.chars(), b.size) : std::string_view(); }

// Reads a Process record through its definition (format/records.h). Unlike the decoder, which
// ignores what it does not use, a launchers field that is there but damaged is an error here.
format::records::Process process_fields(const RawRecord& rec, const std::string& path) {
    format::Cursor c(rec.data, rec.data + rec.size);
    format::records::Process f;
    if (!format::decode(c, f))
        throw TraceError(fmt::format("corrupt trace {}: {}: Process record too short", path, describe_position(rec)));
    if (!f.has_launchers && !c.at_end())
        throw TraceError(fmt::format("corrupt trace {}: {}: launchers run past the record", path, describe_position(rec)));
    return f;
}

}  // namespace

std::vector<ProgramImage> parse_launchers(std::string_view encoded) {
    std::vector<ProgramImage> launchers;
    for (const std::string& one : split(encoded, environment::kLauncherSeparator[0])) {
        if (one.empty()) continue;
        launchers.push_back(ProgramImage{"", split(one, environment::kLauncherArgumentSeparator)});
    }
    return launchers;
}

ProgramChain read_program_chain(const std::string& path) {
    ProgramChain chain;
    chain.trace = path;
    TraceReader reader(path);
    RawRecord rec;
    if (!reader.next(rec) || rec.kind != static_cast<uint8_t>(format::RecordKind::Process)) return chain;
    const format::records::Process f = process_fields(rec, path);
    chain.program.exe = text(f.exe);
    chain.program.argv = split(text(f.cmdline), '\0');
    chain.launchers = parse_launchers(text(f.launchers));
    return chain;
}

std::string exec_successor(const AnalysisResult& result, const std::string& trace) {
    for (const ChildTrace& child : result.children) {
        if (child.kind != "exec" || child.path.empty()) continue;
        std::error_code ec;
        if (fs::is_regular_file(child.path, ec)) return child.path;
        fs::path beside = fs::path(trace).parent_path() / fs::path(child.path).filename();
        if (fs::is_regular_file(beside, ec)) return beside.string();
    }
    return {};
}

ProgramChain follow_exec_chain(const std::string& named, AnalysisResult& result) {
    std::string path = named;
    std::set<std::string> seen{path};
    std::vector<ProgramImage> followed;
    while (true) {
        std::string next = exec_successor(result, path);
        if (next.empty() || !seen.insert(next).second) break;
        followed.push_back(ProgramImage{result.exe, result.argv});
        result = analyze_trace(next);
        path = next;
    }
    ProgramChain chain = read_program_chain(path);
    // A trace of an older tracer names no launchers: the ones followed here are all there is.
    if (chain.launchers.empty()) chain.launchers = std::move(followed);
    return chain;
}

ProgramChain program_of_set(const AnalysedTraceSet& set) {
    const AnalysedTrace* at = &set.traces.front();
    std::vector<ProgramImage> followed;
    for (size_t steps = 0; steps < set.traces.size(); ++steps) {
        std::string next = exec_successor(at->result, at->path);
        if (next.empty()) break;
        const AnalysedTrace* found = nullptr;
        for (const AnalysedTrace& t : set.traces)
            if (trace_file_identity(t.path) == trace_file_identity(next)) found = &t;
        if (!found) break;
        followed.push_back(ProgramImage{at->result.exe, at->result.argv});
        at = found;
    }
    ProgramChain chain = read_program_chain(at->path);
    if (chain.launchers.empty()) chain.launchers = std::move(followed);
    return chain;
}

std::string describe_launcher(const ProgramImage& image) {
    if (image.argv.empty()) return image.exe.empty() ? std::string("?") : std::string(base_name(image.exe));
    std::string text(base_name(image.argv[0]));
    for (size_t i = 1; i < image.argv.size() && i < 3; ++i) {
        const std::string& word = image.argv[i];
        if (word.empty() || word[0] == '-') break;
        text += " " + word;
        if (word.find('/') != std::string::npos) break;
    }
    return text;
}

std::string program_line(const ProgramChain& chain) {
    if (chain.launchers.empty()) return {};
    std::string program = chain.program.exe.empty() ? describe_launcher(chain.program) : chain.program.exe;
    std::string through;
    for (const ProgramImage& l : chain.launchers) through += (through.empty() ? "" : " → ") + describe_launcher(l);
    return fmt::format("program: {}, launched through {} launcher{}: {}", program, chain.launchers.size(),
                       chain.launchers.size() == 1 ? "" : "s", through);
}

nlohmann::json program_json(const ProgramChain& chain) {
    return nlohmann::json{{"exe", chain.program.exe}, {"argv", chain.program.argv}, {"trace", chain.trace}};
}

nlohmann::json launchers_json(const ProgramChain& chain) {
    nlohmann::json list = nlohmann::json::array();
    for (const ProgramImage& l : chain.launchers)
        list.push_back(nlohmann::json{{"argv", l.argv}, {"name", describe_launcher(l)}});
    return list;
}

void add_program_json(const ProgramChain& chain, nlohmann::json& doc) {
    doc["program"] = program_json(chain);
    doc["launchers"] = launchers_json(chain);
}

}  // namespace growtrace
