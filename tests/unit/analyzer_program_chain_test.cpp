// Which program a trace is of, and its launchers (analyzer/analysis/program_chain.h): the Process
// record's launchers field, its absence in older traces, the names the reports give them, and
// the chain followed through Exec records to the program at its end.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/analyze_command.h"
#include "analyzer/analysis/program_chain.h"
#include "format/record_encoder.h"
#include "trace_builder.h"

namespace growtrace {
namespace {

using format::RecordKind;
using testing::TraceBuilder;
using testing::temp_trace_path;

// A Process record as the tracer writes it, with `launchers` appended (nullptr: none at all,
// as an older tracer wrote it).
format::RecordEncoder process_record(uint64_t pid, const std::string& exe, const std::string& cmdline,
                                     const char* launchers) {
    format::RecordEncoder rec(RecordKind::Process);
    rec.varint(pid).varint(1).varint(1000).varint(1000).varint(0);
    rec.string(exe.data(), exe.size()).string(cmdline.data(), cmdline.size()).string("");
    if (launchers) rec.string(launchers);
    return rec;
}

TEST(ProgramChain, LaunchersAreSplitIntoImagesAndArguments) {
    std::vector<ProgramImage> launchers = parse_launchers("env\x1f" "bash\x1f/x/shims/python3\x1e" "bash\x1f/x/shims/python3");
    ASSERT_EQ(launchers.size(), 2u);
    EXPECT_EQ(launchers[0].argv, (std::vector<std::string>{"env", "bash", "/x/shims/python3"}));
    EXPECT_EQ(launchers[1].argv, (std::vector<std::string>{"bash", "/x/shims/python3"}));
    EXPECT_TRUE(parse_launchers("").empty());
}

TEST(ProgramChain, ALauncherIsNamedByItsFirstWordsUpToAScript) {
    EXPECT_EQ(describe_launcher({"", {"/usr/bin/env", "bash", "/x/shims/python3", "-c", "print()"}}),
              "env bash /x/shims/python3");
    EXPECT_EQ(describe_launcher({"", {"bash", "/x/libexec/pyenv", "exec", "python3"}}), "bash /x/libexec/pyenv");
    EXPECT_EQ(describe_launcher({"", {"/bin/sh", "-c", "exec env x"}}), "sh");
    EXPECT_EQ(describe_launcher({"/usr/bin/uname", {}}), "uname");
}

TEST(ProgramChain, TheProcessRecordNamesTheProgramAndItsLaunchers) {
    std::string path = temp_trace_path("chain-final.gtrace");
    TraceBuilder()
        .record(process_record(7, "/usr/bin/python3.11", std::string("python3\0-c\0pass", 15),
                               "/usr/bin/env\x1f" "bash\x1f/x/shims/python3\x1e" "bash\x1f/x/shims/python3"))
        .end(2000, 2000)
        .write(path);
    ProgramChain chain = read_program_chain(path);
    EXPECT_EQ(chain.program.exe, "/usr/bin/python3.11");
    EXPECT_EQ(chain.program.argv, (std::vector<std::string>{"python3", "-c", "pass"}));
    ASSERT_EQ(chain.launchers.size(), 2u);
    EXPECT_EQ(program_line(chain),
              "program: /usr/bin/python3.11, launched through 2 launchers: env bash /x/shims/python3 → bash "
              "/x/shims/python3");
    nlohmann::json doc;
    add_program_json(chain, doc);
    EXPECT_EQ(doc["program"]["exe"], "/usr/bin/python3.11");
    EXPECT_EQ(doc["launchers"][1]["name"], "bash /x/shims/python3");
}

TEST(ProgramChain, AnOlderTraceHasNoLaunchers) {
    std::string path = temp_trace_path("chain-old.gtrace");
    TraceBuilder().record(process_record(7, "/bin/prog", "prog", nullptr)).end(2000, 2000).write(path);
    ProgramChain chain = read_program_chain(path);
    EXPECT_EQ(chain.program.exe, "/bin/prog");
    EXPECT_TRUE(chain.launchers.empty());
    EXPECT_EQ(program_line(chain), "");
}

// A launcher's trace whose Exec record names the program's: analyze reports on the program.
TEST(ProgramChain, AnalyzeFollowsExecRecordsToTheProgram) {
    std::string first = temp_trace_path("chain-a.gtrace");
    std::string second = temp_trace_path("chain-a.exec1.gtrace");
    TraceBuilder().record(process_record(9, "/bin/sh", std::string("sh\0-c\0exec prog", 16), "")).exec(second).write(first);
    TraceBuilder().record(process_record(9, "/bin/prog", "prog", "sh\x1f-c\x1f" "exec prog")).end(2000, 2000).write(second);
    AnalysisResult result = analyze_trace(first);
    ProgramChain chain = follow_exec_chain(first, result);
    EXPECT_EQ(chain.trace, second);
    EXPECT_EQ(result.exe, "/bin/prog");
    ASSERT_EQ(chain.launchers.size(), 1u);
    EXPECT_EQ(describe_launcher(chain.launchers[0]), "sh");
}

}  // namespace
}  // namespace growtrace
