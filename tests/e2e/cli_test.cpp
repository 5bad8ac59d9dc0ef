// The `growtrace` command line: refusals, messages, exit statuses, and that tracing leaves
// the traced program's input, output and exit status alone.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "e2e_support.h"
#include "format/trace_format.h"

namespace growtrace::e2e {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Cli, VersionAndHelp) {
    ProcessResult version = growtrace({"--version"});
    EXPECT_EQ(version.exit_code, 0);
    EXPECT_TRUE(version.out.starts_with("growtrace ")) << version.out;

    // The trace formats it writes and reads, and the CPython versions it has agents for.
    std::string formats = fmt::format("trace format: writes version {} (full traces) and {} (sampled), reads versions 1 to {}\n",
                                      format::kFullVersion, format::kSampledVersion, format::kVersion);
    EXPECT_TRUE(contains(version.out, formats)) << version.out;
    std::string agent_line = version.out.substr(std::min(version.out.size(), version.out.find("CPython agents: ")));
    EXPECT_TRUE(agent_line.starts_with("CPython agents: ")) << version.out;
    EXPECT_TRUE(contains(agent_line, "3.11")) << version.out;  // the one tools/setup.sh requires
    ScratchDir empty;
    ProcessResult no_agent = growtrace({"--version"}, {.env = {{"GROWTRACE_PYAGENT_DIR", empty.path().string()}}});
    EXPECT_EQ(no_agent.exit_code, 0);
    EXPECT_TRUE(contains(no_agent.out, "CPython agents: none found")) << no_agent.out;

    ProcessResult help = growtrace({"run", "--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_TRUE(contains(help.out, "--no-follow-exec")) << help.out;
    EXPECT_TRUE(contains(help.out, "--no-follow-fork")) << help.out;

    for (const char* verb : {"analyze", "dump"}) {
        ProcessResult verb_help = growtrace({verb, "--help"});
        EXPECT_EQ(verb_help.exit_code, 0) << verb;
        EXPECT_TRUE(contains(verb_help.out, "TRACE")) << verb_help.out;
    }
}

TEST(Cli, UsageErrorsExitTwoWithOneLine) {
    ProcessResult none = growtrace({});
    EXPECT_EQ(none.exit_code, 2);

    ProcessResult unknown = growtrace({"frobnicate"});
    EXPECT_EQ(unknown.exit_code, 2);
    EXPECT_EQ(unknown.err, "growtrace: error: unknown verb 'frobnicate' (expected run, analyze, dump, attach, detach, "
                           "report, check, diff or export; see growtrace --help)\n");

    ProcessResult no_command = growtrace({"run"});
    EXPECT_EQ(no_command.exit_code, 2);
    EXPECT_TRUE(contains(no_command.err, "growtrace: error: no command given")) << no_command.err;

    ProcessResult no_trace = growtrace({"analyze"});
    EXPECT_EQ(no_trace.exit_code, 2);
    EXPECT_TRUE(no_trace.err.starts_with("growtrace: error:")) << no_trace.err;
}

TEST(Cli, MissingCommandIsRefused) {
    ScratchDir dir;
    ProcessResult r = growtrace({"run", "--", "gt-no-such-command-4711"}, {.cwd = dir.path().string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "growtrace: error: command not found: gt-no-such-command-4711\n");
    EXPECT_TRUE(dir.files().empty()) << "a trace file was left behind";

    ProcessResult by_path = growtrace({"run", "--", dir / "missing-program"});
    EXPECT_EQ(by_path.exit_code, 2);
    EXPECT_TRUE(contains(by_path.err, "command not found: " + (dir / "missing-program"))) << by_path.err;
}

TEST(Cli, StaticProgramIsRefused) {
    ScratchDir dir;
    ProcessResult r = growtrace({"run", "--", GT_PROGRAM_STATIC_HELLO}, {.cwd = dir.path().string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, std::string("growtrace: error: ") + GT_PROGRAM_STATIC_HELLO +
                         " is statically linked; LD_PRELOAD cannot inject into it\n");
    EXPECT_EQ(r.out, "") << "the static program must not have been run";
    EXPECT_TRUE(dir.files().empty());

    // A script is loaded through its interpreter: a static interpreter is refused too.
    std::string script = dir / "script.sh";
    write_file(script, std::string("#!") + GT_PROGRAM_STATIC_HELLO + "\n");
    chmod(script.c_str(), 0755);
    ProcessResult via_script = growtrace({"run", "--", script}, {.cwd = dir.path().string()});
    EXPECT_EQ(via_script.exit_code, 2);
    EXPECT_TRUE(contains(via_script.err, "is statically linked; LD_PRELOAD cannot inject into it"))
        << via_script.err;
    EXPECT_TRUE(contains(via_script.err, std::string("interpreter ") + GT_PROGRAM_STATIC_HELLO)) << via_script.err;
}

TEST(Cli, UnwritableTracePathRunsTheCommandUntraced) {
    ScratchDir dir;
    std::vector<std::string> program{GT_PROGRAM_EXIT_WITH, "--lines", "5", "--status", "3"};
    ProcessResult plain = run_process(program);
    ASSERT_EQ(plain.exit_code, 3);

    // A missing directory: unwritable even for root, which CI runs as.
    std::string trace = dir / "no-such-dir/trace.gtrace";
    std::vector<std::string> args{"run", "-o", trace, "--"};
    args.insert(args.end(), program.begin(), program.end());
    ProcessResult r = growtrace(args);
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_EQ(r.out, plain.out);
    EXPECT_TRUE(contains(r.err, "growtrace: warning: cannot write trace to " + trace +
                                    ": No such file or directory; running the command untraced"))
        << r.err;
    EXPECT_FALSE(contains(r.err, "trace written")) << r.err;
    EXPECT_FALSE(fs::exists(trace));

    // A directory in the way.
    fs::create_directory(dir / "a-directory.gtrace");
    ProcessResult dir_in_way = growtrace({"run", "-o", dir / "a-directory.gtrace", "--", GT_PROGRAM_EXIT_WITH});
    EXPECT_EQ(dir_in_way.exit_code, 0);
    EXPECT_TRUE(contains(dir_in_way.err, "Is a directory; running the command untraced")) << dir_in_way.err;

    // A device (it exists, but no trace can be made there): said as such, not "File exists".
    std::vector<std::string> to_device{"run", "-o", "/dev/full", "--"};
    to_device.insert(to_device.end(), program.begin(), program.end());
    ProcessResult device = growtrace(to_device);
    EXPECT_EQ(device.exit_code, 3);
    EXPECT_EQ(device.out, plain.out);
    EXPECT_EQ(device.err, "growtrace: warning: cannot write trace to /dev/full: not a regular file (a trace is a file "
                          "of its own); running the command untraced\n");
}

TEST(Cli, TracedProgramKeepsItsOutputInputAndStatus) {
    ScratchDir dir;
    std::string input;
    for (int i = 0; i < 2000; ++i) input += "input line " + std::to_string(i) + "\n";
    std::vector<std::string> program{GT_PROGRAM_EXIT_WITH, "--lines", "300", "--cat", "--status", "7"};
    ProcessResult plain = run_process(program, {.stdin_data = input});
    ASSERT_EQ(plain.exit_code, 7);

    std::string trace = dir / "io.gtrace";
    std::vector<std::string> args{"run", "-o", trace, "--"};
    args.insert(args.end(), program.begin(), program.end());
    ProcessResult traced = growtrace(args, {.cwd = dir.path().string(), .stdin_data = input});
    EXPECT_EQ(traced.exit_code, 7) << traced.err;
    EXPECT_EQ(traced.out, plain.out);
    EXPECT_EQ(traced.err, "growtrace: trace written to " + trace + "\n");
    EXPECT_GT(fs::file_size(trace), 16u);

    // The traced program's own stderr passes through too, and an existing -o file is replaced.
    ProcessResult bad_arg = growtrace({"run", "-o", trace, "--", GT_PROGRAM_EXIT_WITH, "--bogus"});
    EXPECT_EQ(bad_arg.exit_code, 64);
    EXPECT_TRUE(bad_arg.err.starts_with("exit_with: unknown argument --bogus\n")) << bad_arg.err;
    EXPECT_TRUE(contains(bad_arg.err, "growtrace: trace written to " + trace)) << bad_arg.err;
}

TEST(Cli, DefaultTraceIsNamedAfterTheTracedPid) {
    ScratchDir dir;
    ProcessResult r = growtrace({"run", "--", GT_PROGRAM_EXIT_WITH, "--pid", "--lines", "1"},
                                {.cwd = dir.path().string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(r.out.starts_with("pid ")) << r.out;
    int pid = std::stoi(r.out.substr(4));
    std::string expected = "growtrace." + std::to_string(pid) + ".gtrace";
    EXPECT_EQ(dir.files(), std::vector<std::string>{expected});
    EXPECT_EQ(r.err, "growtrace: trace written to " + (dir / expected) + "\n");
}

TEST(Cli, KilledCommandIsReportedWithItsSignal) {
    ScratchDir dir;
    ProcessResult term = growtrace({"run", "-o", dir / "term.gtrace", "--", GT_PROGRAM_EXIT_WITH, "--signal", "15"});
    EXPECT_EQ(term.signal, 0);
    EXPECT_EQ(term.exit_code, 128 + 15);
    EXPECT_TRUE(contains(term.err, "growtrace: command killed by signal 15 (SIGTERM)\n")) << term.err;
    EXPECT_EQ(term.out, "exit_with: line 0 of 3\nexit_with: line 1 of 3\nexit_with: line 2 of 3\n");

    ProcessResult kill9 = growtrace({"run", "-o", dir / "kill.gtrace", "--", GT_PROGRAM_EXIT_WITH, "--signal", "9"});
    EXPECT_EQ(kill9.exit_code, 128 + 9);
    EXPECT_TRUE(contains(kill9.err, "growtrace: command killed by signal 9 (SIGKILL)\n")) << kill9.err;
}

// Like time(1): an interrupt meant for the terminal's foreground job reaches the command, and
// growtrace itself stays to report; a termination request sent to growtrace is passed on.
TEST(Cli, InterruptIsIgnoredAndTerminationForwarded) {
    ScratchDir dir;
    std::vector<std::string> args{"run", "-o", dir / "sig.gtrace", "--", GT_PROGRAM_MEMO_TABLE, "150", "5000"};
    args.insert(args.begin(), GT_GROWTRACE);

    // The trace file exists once the command runs, and by then growtrace has set up its signals.
    auto wait_for_trace = [&] {
        for (int i = 0; i < 1000 && !fs::exists(dir / "sig.gtrace"); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    };
    Spawned interrupted(args, {.cwd = dir.path().string()});
    wait_for_trace();
    kill(interrupted.pid(), SIGINT);  // to growtrace only, not to its process group
    kill(interrupted.pid(), SIGQUIT);
    ProcessResult r = interrupted.wait();
    EXPECT_EQ(r.signal, 0) << r.err;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("memo_table: 150 entries"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("growtrace: trace written to"), std::string::npos) << r.err;

    fs::remove(dir / "sig.gtrace");
    Spawned terminated(args, {.cwd = dir.path().string()});
    wait_for_trace();
    kill(terminated.pid(), SIGTERM);
    ProcessResult t = terminated.wait();
    EXPECT_EQ(t.signal, 0) << "growtrace itself was killed: " << t.err;
    EXPECT_EQ(t.exit_code, 128 + SIGTERM) << t.err;
    EXPECT_NE(t.err.find("growtrace: command killed by signal 15 (SIGTERM)"), std::string::npos) << t.err;
    EXPECT_EQ(t.out, "") << "the command should have been stopped before it finished";
}

// Should the command itself crash, it says so with its own stack and what to report, dies of
// the same signal, and the program it traces runs on to its end, still traced.
TEST(Cli, ACrashOfTheCommandPrintsItsStackAndSparesTheProgram) {
    ProcessResult segv = growtrace({"--version"}, {.env = {{"GROWTRACE_TEST_CRASH", "start"}}});
    EXPECT_EQ(segv.signal, SIGSEGV) << segv.describe();
    EXPECT_TRUE(segv.err.starts_with("growtrace: internal error: signal 11 (SEGV) in the growtrace command ")) << segv.err;
    EXPECT_TRUE(contains(segv.err, "growtrace: its stack:\n")) << segv.err;
    EXPECT_TRUE(contains(segv.err, "crash_here_for_tests")) << segv.err;  // symbolized, with files and lines
    EXPECT_TRUE(contains(segv.err, "crash_report.cpp:")) << segv.err;
    EXPECT_TRUE(contains(segv.err, "growtrace: please report this bug")) << segv.err;

    ProcessResult thrown = growtrace({"--version"}, {.env = {{"GROWTRACE_TEST_CRASH", "exception"}}});
    EXPECT_EQ(thrown.signal, SIGABRT) << thrown.describe();
    EXPECT_TRUE(thrown.err.starts_with("growtrace: internal error: uncaught exception (crash requested by "
                                       "GROWTRACE_TEST_CRASH)"))
        << thrown.err;
    EXPECT_EQ(thrown.err.find("internal error", 30), thrown.err.npos) << "reported twice: " << thrown.err;

    ScratchDir dir;
    std::string done = dir / "done";
    std::string trace = dir / "spared.gtrace";
    ProcessResult r = growtrace({"run", "-o", trace, "--", "/bin/sh", "-c", "sleep 0.5; echo done > '" + done + "'"},
                                {.env = {{"GROWTRACE_TEST_CRASH", "run-wait"}}});
    EXPECT_EQ(r.signal, SIGSEGV) << r.describe();
    EXPECT_TRUE(contains(r.err, "growtrace: internal error: signal 11 (SEGV)")) << r.err;
    EXPECT_TRUE(eventually([&] { return read_file(done) == "done\n"; }, std::chrono::seconds(20))) << read_file(done);
    // The program, spared, ends on its own and its tracer writes the trace's end.
    EXPECT_TRUE(eventually([&] { return contains(growtrace({"dump", trace}).out, "ended cleanly"); }, std::chrono::seconds(20)));
    ProcessResult analysis = growtrace({"analyze", trace});
    EXPECT_EQ(analysis.exit_code, 0) << analysis.err;
    EXPECT_TRUE(contains(analysis.out, "/bin/sh -c")) << analysis.out;
}

// --sample SIZE (run, check, attach): sizes with K/M/G suffixes reach the tracer as bytes;
// --sample 0 and --full mean every allocation; a bad size or both options are usage errors.
TEST(Cli, SampleOptionSetsTheTracesMeanBetweenSamples) {
    ScratchDir dir;
    for (const auto& [option, bytes] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"--sample", "64K"}, "65536"}, {{"--sample", "1m"}, "1048576"}, {{"--sample", "100000"}, "100000"},
             {{"--sample", "0"}, "0"}, {{"--full"}, "0"}, {{}, "0"}}) {
        std::vector<std::string> args{"run"};
        args.insert(args.end(), option.begin(), option.end());
        args.insert(args.end(), {"-o", dir / "s.gtrace", "--", GT_PROGRAM_MEMO_TABLE, "10", "0"});
        ProcessResult r = growtrace(args, {.cwd = dir.path().string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        ProcessResult dump = growtrace({"dump", dir / "s.gtrace"});
        EXPECT_TRUE(contains(dump.out, "Sampling mean_bytes=" + bytes + " ")) << bytes << "\n" << dump.out.substr(0, 1500);
    }
    for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
             {"run", "--sample", "lots", "--", GT_PROGRAM_MEMO_TABLE, "1", "0"},
             {"run", "--sample", "64K", "--full", "--", GT_PROGRAM_MEMO_TABLE, "1", "0"},
             {"check", "--sample", "12Q", "--", GT_PROGRAM_MEMO_TABLE, "1", "0"},
             {"attach", "1", "--sample", "-3"}}) {
        ProcessResult r = growtrace(bad, {.cwd = dir.path().string()});
        EXPECT_EQ(r.exit_code, 2) << bad[2] << "\n" << r.err;
        EXPECT_TRUE(r.err.starts_with("growtrace: error: ")) << r.err;
        EXPECT_FALSE(contains(r.out, "memo_table:")) << "the command must not run";
    }
    ProcessResult help = growtrace({"attach", "--help"});
    EXPECT_TRUE(contains(help.out, "Default: --sample 512K")) << help.out;
}

TEST(Cli, AnalyzeRefusesUnwritableReport) {
    ScratchDir dir;
    std::string trace = dir / "t.gtrace";
    trace_program(dir, trace, {GT_PROGRAM_EXIT_WITH, "--lines", "1"});
    std::string report = dir / "no-such-dir/report.json";
    ProcessResult r = growtrace({"analyze", trace, "--json", "-o", report});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "growtrace: error: cannot write report to " + report + ": No such file or directory\n");
}


// The question after a fix: the memo table that grows (before) against the LRU that stops
// (after), each way round, from traces and from a saved JSON analysis.
TEST(Cli, DiffSaysWhatIsGoneAndFailsOnNewGrowth) {
    ScratchDir dir;
    const std::string growing = dir / "memo.gtrace", bounded = dir / "lru.gtrace";
    trace_program(dir, growing, {GT_PROGRAM_MEMO_TABLE, "1000", "2000"});
    trace_program(dir, bounded, {GT_PROGRAM_BOUNDED_LRU, "20000", "500", "1000", "10"});

    ProcessResult fixed = growtrace({"diff", growing, bounded});
    EXPECT_EQ(fixed.exit_code, 0) << fixed.describe() << fixed.err;
    EXPECT_TRUE(contains(fixed.out, "\ngone: memory allocated in (anonymous namespace)::remember_result(unsigned long) (memo_table.cpp:")) << fixed.out;
    EXPECT_FALSE(contains(fixed.out, "\nnew: ")) << fixed.out;

    const std::string saved = dir / "memo.json";
    ASSERT_EQ(growtrace({"analyze", growing, "--json", "-o", saved}).exit_code, 0);
    ProcessResult regressed = growtrace({"diff", bounded, saved, "--json"});
    EXPECT_EQ(regressed.exit_code, 3) << regressed.describe() << regressed.err;
    const nlohmann::json d = nlohmann::json::parse(regressed.out);
    ASSERT_EQ(d["root_causes"].size(), 1u) << d.dump(2);
    EXPECT_EQ(d["root_causes"][0]["status"], "new");
    EXPECT_EQ(d["before"]["root_causes"], 0);

    ProcessResult same = growtrace({"diff", growing, saved});
    EXPECT_EQ(same.exit_code, 0) << same.out;
    EXPECT_TRUE(contains(same.out, "\nstill growing: memory allocated in (anonymous namespace)::remember_result(unsigned long) (memo_table.cpp:")) << same.out;
}

TEST(Cli, DiffRefusesWhatIsNotAnAnalysis) {
    ScratchDir dir;
    const std::string junk = dir / "junk.json";
    write_file(junk, "{\"hello\": 1}");
    ProcessResult r = growtrace({"diff", junk, junk});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "growtrace: error: BEFORE is not a growtrace analysis (no \"findings\")\n");
    ProcessResult missing = growtrace({"diff", dir / "nope.gtrace", junk});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_TRUE(contains(missing.err, "cannot read " + (dir / "nope.gtrace") + ": No such file or directory")) << missing.err;
}

}  // namespace
}  // namespace growtrace::e2e
