// An exec chain is one program: `growtrace run` through launchers (a pyenv shim, `sh -c`,
// `env`) leaves the program's trace under the name -o gave, the launchers named in it, and no
// traces of the helpers that allocated little (subshells, `uname`); analyze reports on the
// program and says which launchers it went through. Forked workers keep their traces.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "e2e_support.h"
#include "report_view.h"

namespace growtrace::e2e {
namespace {

using nlohmann::json;

std::vector<std::string> traces_in(const ScratchDir& dir) {
    std::vector<std::string> out;
    for (const std::string& name : dir.files())
        if (name.ends_with(".gtrace")) out.push_back(name);
    return out;
}

std::vector<std::string> launcher_names(const json& report) {
    std::vector<std::string> names;
    if (!report.contains("launchers")) return names;
    for (const json& l : report["launchers"]) names.push_back(l.value("name", ""));
    return names;
}

std::string pyenv_shim() {
    const char* home = getenv("HOME");
    const char* root = getenv("PYENV_ROOT");
    std::string dir = root && *root ? root : std::string(home ? home : "/root") + "/.pyenv";
    return dir + "/shims/python3";
}

// `sh -c "uname; exec env PROGRAM..."`: two launchers (sh, env), one helper (uname).
std::vector<std::string> through_sh_and_env(const std::vector<std::string>& program) {
    std::string command = "uname > /dev/null; exec env";
    for (const std::string& word : program) command += " '" + word + "'";
    return {"/bin/sh", "-c", command};
}

TEST(ExecChain, PyenvShimLeavesOneTraceOfThePythonProgram) {
    std::string shim = pyenv_shim();
    if (access(shim.c_str(), X_OK) != 0) GTEST_SKIP() << "no pyenv shim at " << shim;
    ProcessResult untraced = run_process({shim, "-c", "print(1)"});
    if (untraced.exit_code != 0) GTEST_SKIP() << shim << " runs no python here: " << untraced.err;
    ScratchDir dir;
    std::string trace = dir / "py.gtrace";
    ProcessResult r = trace_program(dir, trace, {shim, "-c", "import sys; print(sys.implementation.name)"});
    EXPECT_EQ(r.out, "cpython\n");

    // One file: the program's. No line per helper, one summary line at most.
    EXPECT_EQ(traces_in(dir), std::vector<std::string>{"py.gtrace"}) << r.err;
    EXPECT_EQ(r.err.find("trace of "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("helper processes, 0 findings"), std::string::npos) << r.err;

    json report = analyze_program_json(dir, trace);
    ASSERT_TRUE(report.contains("program")) << report.dump().substr(0, 2000);
    std::string exe = report["program"].value("exe", "");
    EXPECT_NE(exe.find("/bin/python3"), std::string::npos) << exe;
    std::vector<std::string> launchers = launcher_names(report);
    ASSERT_GE(launchers.size(), 2u) << report["launchers"].dump();
    EXPECT_EQ(launchers.front(), "env bash " + shim) << fmt::format("{}", fmt::join(launchers, " | "));
    for (const std::string& l : launchers) EXPECT_EQ(l.find("python3."), std::string::npos) << l;

    // The text report says it in one line; --with-children names no empty file.
    ProcessResult text = growtrace({"analyze", trace});
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_TRUE(text.out.starts_with(fmt::format("program: {}, launched through {} launchers: env bash {} → ", exe,
                                                 launchers.size(), shim)))
        << text.out.substr(0, 600);
    ProcessResult children = growtrace({"analyze", "--with-children", trace});
    EXPECT_EQ(children.exit_code, 0) << children.err;
    EXPECT_EQ(children.err.find("is missing: \n"), std::string::npos) << children.err;
}

TEST(ExecChain, ShAndEnvLaunchersFoldIntoTheProgramsTrace) {
    ScratchDir dir;
    std::string trace = dir / "chain.gtrace";
    ProcessResult r = trace_program(dir, trace, through_sh_and_env({GT_PROGRAM_MEMO_TABLE, "100", "1000"}));
    EXPECT_NE(r.out.find("memo_table: 100 entries"), std::string::npos) << r.out;
    EXPECT_EQ(traces_in(dir), std::vector<std::string>{"chain.gtrace"}) << r.err;
    EXPECT_NE(r.err.find("1 helper process, 0 findings"), std::string::npos) << r.err;

    json json_report = analyze_program_json(dir, trace);
    EXPECT_EQ(json_report["program"].value("exe", ""), GT_PROGRAM_MEMO_TABLE);
    EXPECT_EQ(launcher_names(json_report), (std::vector<std::string>{"sh", "env " + std::string(GT_PROGRAM_MEMO_TABLE)}));
    Report report(json_report);
    auto site = report.stack_at("remember_result", "memo_table.cpp", marker_line("memo_table.cpp", "remember_result"));
    ASSERT_TRUE(site) << report.summary();
    EXPECT_EQ(site->live_bytes, 100u * 1000u);
}

// With every trace kept, the first still leads analyze to the program at the chain's end.
TEST(ExecChain, KeptLauncherTracesLeadAnalyzeToTheProgram) {
    ScratchDir dir;
    std::string trace = dir / "kept.gtrace";
    ProcessResult r = trace_program(dir, trace, through_sh_and_env({GT_PROGRAM_MEMO_TABLE, "100", "1000"}), 0,
                                    {"--keep-helper-traces"});
    std::vector<std::string> traces = traces_in(dir);
    // sh, env, memo_table, and uname (sh's vfork child's image: kept.<pid>.exec1.gtrace).
    EXPECT_EQ(traces.size(), 4u) << fmt::format("{}", fmt::join(traces, " "));
    EXPECT_TRUE(fs::exists(dir / "kept.exec1.gtrace")) << fmt::format("{}", fmt::join(traces, " "));
    EXPECT_TRUE(fs::exists(dir / "kept.exec2.gtrace")) << fmt::format("{}", fmt::join(traces, " "));
    EXPECT_FALSE(fs::exists(dir / "kept.exec3.gtrace")) << "uname took a name of the chain";

    json json_report = analyze_program_json(dir, trace);
    EXPECT_EQ(json_report["program"].value("exe", ""), GT_PROGRAM_MEMO_TABLE);
    EXPECT_EQ(json_report["program"].value("trace", ""), dir / "kept.exec2.gtrace");
    EXPECT_EQ(launcher_names(json_report).size(), 2u) << json_report["launchers"].dump();
    EXPECT_TRUE(Report(json_report).stack_in("remember_result")) << Report(json_report).summary();

    // Every Exec record names its image's trace: --with-children finds them all.
    ProcessResult children = growtrace({"analyze", "--with-children", "--json", trace});
    EXPECT_EQ(children.exit_code, 0) << children.err;
    EXPECT_EQ(children.err.find("missing"), std::string::npos) << children.err;
}

// A forked worker keeps its trace when its parent is folded away as a launcher.
TEST(ExecChain, ForkedWorkerOfALauncherKeepsItsTrace) {
    ScratchDir dir;
    std::string trace = dir / "fe.gtrace";
    ProcessResult r = trace_program(dir, trace, {GT_PROGRAM_FORK_EXEC, GT_PROGRAM_MEMO_TABLE, "100", "1000"});
    auto child_pid_at = r.out.find("fork_exec: child ");
    ASSERT_NE(child_pid_at, std::string::npos) << r.out;
    int child_pid = std::stoi(r.out.substr(child_pid_at + 17));
    std::string child = fmt::format("fe.{}.gtrace", child_pid);
    EXPECT_EQ(traces_in(dir), (std::vector<std::string>{child, "fe.gtrace"})) << r.err;
    EXPECT_NE(r.err.find("trace of a child process written to " + (dir / child)), std::string::npos) << r.err;
    EXPECT_EQ(analyze_program_json(dir, trace)["program"].value("exe", ""), GT_PROGRAM_MEMO_TABLE);
    EXPECT_TRUE(Report(analyze_program_json(dir, dir / child)).stack_in("child_keep"));
}

}  // namespace
}  // namespace growtrace::e2e
