// growtrace export --format pprof, read back by the standard reader: `go tool pprof` (Debian's
// golang-go, installed by tools/setup.sh). Asserts on what it prints: -top (flat in-use bytes by
// function), -traces (every sample's stack with files and lines, and its labels) and -raw
// (sample values, mappings).
#include <sys/stat.h>

#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "e2e_support.h"

namespace growtrace::e2e {
namespace {

using nlohmann::json;

std::string go_binary() {
    const char* path = getenv("PATH");
    std::istringstream dirs(path ? path : "/usr/bin");
    for (std::string dir; std::getline(dirs, dir, ':');)
        if (!dir.empty() && access((dir + "/go").c_str(), X_OK) == 0) return dir + "/go";
    return {};
}

// `go tool pprof -symbolize=none ARGS... FILE`: its output, asserting it succeeded. The profile
// is symbolized already; -symbolize=none makes sure pprof does not look at the binaries.
std::string pprof(const std::vector<std::string>& args, const std::string& file) {
    const std::string go = go_binary();
    if (go.empty()) {
        ADD_FAILURE() << "go is not installed: tools/setup.sh installs golang-go, whose go tool pprof reads the export";
        return {};
    }
    std::vector<std::string> argv{go, "tool", "pprof", "-symbolize=none"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(file);
    ProcessResult r = run_process(argv, {.env = {{"HOME", fs::path(file).parent_path().string()}}});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
}

// The rows of -top after its header line "flat flat% sum% cum cum%".
std::vector<std::string> top_rows(const std::string& top) {
    std::vector<std::string> rows;
    std::istringstream in(top);
    bool header = false;
    for (std::string line; std::getline(in, line);) {
        if (header) rows.push_back(line);
        else header = line.find("flat%") != std::string::npos;
    }
    return rows;
}

// The -traces blocks (each: labels, then the stack), split at the dashed lines.
std::vector<std::string> trace_blocks(const std::string& traces) {
    std::vector<std::string> blocks;
    std::istringstream in(traces);
    std::string block;
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with("-----------+")) {
            if (!block.empty()) blocks.push_back(block);
            block.clear();
        } else {
            block += line + "\n";
        }
    }
    if (!block.empty()) blocks.push_back(block);
    return blocks;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string export_pprof(const ScratchDir& dir, const std::vector<std::string>& traces, const std::string& name) {
    std::vector<std::string> args{"export", "--format", "pprof", "-o", dir / name};
    args.insert(args.end(), traces.begin(), traces.end());
    ProcessResult r = growtrace(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "written to " + (dir / name))) << r.err;
    return dir / name;
}

TEST(Export, NativeMemoTableReadsBackInGoToolPprof) {
    ScratchDir dir;
    trace_program(dir, dir / "memo.gtrace", {GT_PROGRAM_MEMO_TABLE, "300", "2000"});
    json report = analyze_json(dir, dir / "memo.gtrace");
    const std::string profile = export_pprof(dir, {dir / "memo.gtrace"}, "memo.pb.gz");
    // gzip, as pprof files are.
    const std::string bytes = read_file(profile);
    ASSERT_GT(bytes.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);

    // In-use space is the default sample type; remember_result holds 300 blocks of 1000 bytes.
    const std::string top = pprof({"-top", "-unit=B"}, profile);
    EXPECT_TRUE(contains(top, "Type: inuse_space")) << top;
    EXPECT_TRUE(contains(top, "Time: ")) << top;
    EXPECT_TRUE(contains(top, "Duration: ")) << top;
    const std::vector<std::string> rows = top_rows(top);
    ASSERT_FALSE(rows.empty()) << top;
    EXPECT_TRUE(std::regex_search(rows[0], std::regex(R"(^\s*300000B\s.*remember_result)"))) << top;
    const std::string objects = pprof({"-top", "-sample_index=inuse_objects"}, profile);
    EXPECT_TRUE(std::regex_search(objects, std::regex(R"(\n\s*300\s[^\n]*remember_result)"))) << objects;
    const std::string allocated = pprof({"-top", "-unit=B", "-sample_index=alloc_space"}, profile);
    EXPECT_TRUE(contains(allocated, "Type: alloc_space")) << allocated;

    // The stack with files and lines, and its labels: the verdict and the process.
    const int line = marker_line("memo_table.cpp", "remember_result");
    bool found = false;
    for (const std::string& block : trace_blocks(pprof({"-traces", "-lines"}, profile))) {
        if (!contains(block, "remember_result")) continue;
        found = true;
        EXPECT_TRUE(contains(block, "verdict:  unbounded")) << block;
        EXPECT_TRUE(contains(block, "pid:  " + std::to_string(report["pid"].get<uint64_t>()))) << block;
        EXPECT_TRUE(contains(block, "memo_table.cpp:" + std::to_string(line))) << block;
        EXPECT_TRUE(contains(block, "handle_request")) << block;
    }
    EXPECT_TRUE(found);

    // Every value of the sample, and the growth rate the analysis gives the finding.
    const std::string raw = pprof({"-raw"}, profile);
    EXPECT_TRUE(contains(raw, "inuse_space/bytes[dflt] inuse_objects/count alloc_space/bytes alloc_objects/count "
                              "growth/bytes_per_second"))
        << raw.substr(0, 2000);
    const json finding = findings_of_kind(report, "unbounded_growth").at(0);
    const auto growth = static_cast<int64_t>(std::llround(finding["growth_bytes_per_s"].get<double>()));
    EXPECT_TRUE(contains(raw, fmt::format("300000        300     300000        300 {:>10}:", growth)))
        << raw.substr(0, 3000);
    // The program's own binary is the first mapping; every mapping says it is symbolized.
    std::smatch first;
    ASSERT_TRUE(std::regex_search(raw, first, std::regex(R"(Mappings\n1: \S+ (\S+) )"))) << raw;
    EXPECT_TRUE(first[1].str().ends_with("/memo_table")) << first[1];
    EXPECT_FALSE(std::regex_search(raw, std::regex(R"(\n\d+: 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ \S+ ?\S* $)")))
        << "a mapping without [FN][FL][LN]";
}

TEST(Export, PythonFramesInGoToolPprof) {
    if (access(kVenvPython.c_str(), X_OK) != 0) GTEST_SKIP() << kVenvPython << " missing (tools/setup_python.sh)";
    ScratchDir dir;
    trace_program(dir, dir / "dict.gtrace",
                  {kVenvPython, kPythonPrograms + "growing_dict.py", "--iterations", "20000", "--pause-every", "500"});
    const std::string profile = export_pprof(dir, {dir / "dict.gtrace"}, "dict.pb.gz");

    // The function that builds what the dict keeps holds the most, by in-use space.
    const std::string top = pprof({"-top"}, profile);
    const std::vector<std::string> rows = top_rows(top);
    ASSERT_FALSE(rows.empty()) << top;
    EXPECT_TRUE(std::regex_search(rows[0], std::regex(R"(\smake_value$)"))) << top;

    // Its Python frames, with files and lines, under the [python] mapping.
    const std::string file = kPythonPrograms + "growing_dict.py";
    const std::string make_value = fmt::format("make_value {}:{}", file, python_mark("growing_dict.py", "make_value"));
    const std::string caller = fmt::format("main {}:{}", file, python_mark("growing_dict.py", "remember_call"));
    bool found = false;
    for (const std::string& block : trace_blocks(pprof({"-traces", "-lines"}, profile))) {
        if (!contains(block, make_value) || contains(block, "<listcomp>")) continue;
        found = true;
        EXPECT_TRUE(contains(block, caller)) << block;
        EXPECT_TRUE(contains(block, "verdict:  unbounded")) << block;
    }
    EXPECT_TRUE(found) << "no stack with " << make_value;
    const std::string raw = pprof({"-raw"}, profile);
    EXPECT_TRUE(std::regex_search(raw, std::regex(R"(\n\d+: 0x0/0x0/0x0 \[python\]  \[FN\]\[FL\]\[LN\])"))) << raw.substr(0, 500);
    std::smatch python_mapping;
    ASSERT_TRUE(std::regex_search(raw, python_mapping, std::regex(R"(\n(\d+): 0x0/0x0/0x0 \[python\])")));
    EXPECT_TRUE(std::regex_search(raw, std::regex(" M=" + python_mapping[1].str() + " make_value " + file)));
}

TEST(Export, RefusesBadInput) {
    ScratchDir dir;
    ProcessResult missing = growtrace({"export", "--format", "pprof", "-o", dir / "x.pb.gz", dir / "missing.gtrace"});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_TRUE(missing.err.starts_with("growtrace: error:")) << missing.err;
    EXPECT_FALSE(fs::exists(dir / "x.pb.gz"));
    ProcessResult format = growtrace({"export", "--format", "svg", "-o", dir / "x", dir / "missing.gtrace"});
    EXPECT_EQ(format.exit_code, 2);
}

}  // namespace
}  // namespace growtrace::e2e
