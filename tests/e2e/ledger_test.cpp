// The ledger: memory allocated in one thread and freed in another (hand-off queues, thread pools,
// executors, a cache shared by threads) is accounted exactly. Every case here is bounded, so
// each asserts no finding, a trace whose Ledger record balances against the file, and what must
// be true of every trace: allocations minus frees equal what the program still holds, however
// much work it did. Native and CPython 3.10 to 3.13; full, sampled and attached; and with both
// cores busy with another process.
#include <fmt/core.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "e2e_support.h"

namespace growtrace::e2e {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// How a trace began. From the program's start every free of a recorded block is seen, so no
// allocation ever lands on an address the trace still holds live (the compactor's inferred
// frees: each one is a lost free). Attached, a block may have been freed inside a call that
// began before the hooks were patched in.
enum class Began { AtStart, Attached };

// The ledger of an `analyze --json` report, asserted to balance (with no finding: every program
// here is bounded). Returns what the file holds live at the end.
uint64_t balanced_live(const json& report, Began began) {
    const json& ledger = report["ledger"];
    EXPECT_TRUE(ledger["checked"].get<bool>()) << ledger.dump();
    EXPECT_TRUE(ledger.value("balanced", false)) << ledger.dump() << "\n" << report["warnings"].dump();
    EXPECT_EQ(ledger["tracer"]["lost_events"], 0) << ledger.dump();
    EXPECT_EQ(ledger["file_live"], ledger["tracer"]["live"]) << ledger.dump();
    EXPECT_TRUE(report["findings"].empty()) << "a bounded program reported as growing:\n"
                                            << report["findings"].dump(1).substr(0, 3000);
    EXPECT_TRUE(report["warnings"].empty()) << report["warnings"].dump();
    if (began == Began::AtStart)
        EXPECT_EQ(ledger["tracer"]["inferred_frees"], 0)
            << "frees were lost: allocations landed on addresses the trace still held live\n" << ledger.dump();
    return ledger["file_live"].get<uint64_t>();
}

uint64_t balanced_live(const ScratchDir& dir, const std::string& trace, Began began = Began::AtStart) {
    return balanced_live(analyze_json(dir, trace), began);
}

std::vector<std::string> handoff(const std::vector<std::string>& args) {
    std::vector<std::string> argv{GT_PROGRAM_HANDOFF};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

// Two busy loops, one per core, for as long as the object lives: a loaded machine.
class BusyCores {
public:
    BusyCores() {
        for (int i = 0; i < 2; ++i) {
            pid_t pid = fork();
            if (pid == 0) {
                volatile unsigned long spin = 0;
                for (;;) spin = spin + 1;
            }
            pids_.push_back(pid);
        }
    }
    ~BusyCores() {
        for (pid_t pid : pids_)
            if (pid > 0) {
                kill(pid, SIGKILL);
                waitpid(pid, nullptr, 0);
            }
    }

private:
    std::vector<pid_t> pids_;
};

class NativeLedger : public ::testing::TestWithParam<TraceMode> {};

// Two producers, two consumers, a queue of at most 64 blocks, sizes from 24 bytes to 200 KB
// (above the mmap threshold), malloc / calloc / posix_memalign / aligned_alloc, reallocs in the
// consumers, pauses, and producers replaced by new threads every 20,000 blocks. At the end the
// program keeps 100 blocks: a full trace holds exactly those live beyond what a run of almost
// no work holds (the C and C++ runtimes' own).
TEST_P(NativeLedger, BlocksHandedBetweenThreadsAreAllAccountedFor) {
    ScratchDir dir;
    const std::vector<std::string> mode = mode_options(GetParam());
    trace_program(dir, dir / "small.gtrace", handoff({"--items", "2000"}), 0, mode);
    trace_program(dir, dir / "big.gtrace", handoff({"--items", "200000", "--keep", "100"}), 0, mode);
    const uint64_t baseline = balanced_live(dir, dir / "small.gtrace");
    const uint64_t held = balanced_live(dir, dir / "big.gtrace");
    if (GetParam() == TraceMode::Full) {
        EXPECT_EQ(held, baseline + 100) << "allocations minus frees is not what the program holds";
    } else {
        // Samples: 100 blocks of 100 bytes are about 0.02 of a sample of 512K; what is live is
        // the runtime's few samples, whatever the work.
        EXPECT_LE(held, baseline + 5);
    }
}

// More threads than cores, every thread pair handing to every other, on a machine whose two
// cores are busy with another process: the writer falls behind and threads are preempted
// in the middle of events, and still no free is lost.
TEST(LedgerUnderLoad, ManyThreadsOnBusyCoresLoseNoFree) {
    ScratchDir dir;
    trace_program(dir, dir / "small.gtrace", handoff({"--items", "2000"}));
    {
        BusyCores load;
        trace_program(dir, dir / "big.gtrace",
                      handoff({"--producers", "6", "--consumers", "5", "--items", "150000", "--keep", "40",
                               "--respawn", "3000"}));
    }
    const uint64_t baseline = balanced_live(dir, dir / "small.gtrace");
    EXPECT_EQ(balanced_live(dir, dir / "big.gtrace"), baseline + 40);
}

INSTANTIATE_TEST_SUITE_P(Modes, NativeLedger, ::testing::Values(TraceMode::Full, TraceMode::Sampled),
                         [](const ::testing::TestParamInfo<TraceMode>& info) { return mode_name(info.param); });

// A program that ends with _exit() runs no destructor, so the tracer's own end never ran: the
// events after its last flush were lost. The blocks it allocates just before are in the trace.
TEST(Ledger, AProgramEndingWithUnderscoreExitKeepsItsLastEvents) {
    ScratchDir dir;
    const std::string trace = dir / "immediate.gtrace";
    ProcessResult r = trace_program(dir, trace, {GT_PROGRAM_EXIT_WITH, "--lines", "2", "--keep", "500", "--immediate", "--status", "5"}, 5);
    EXPECT_EQ(r.out, "exit_with: line 0 of 2\nexit_with: line 1 of 2\n");
    json report = analyze_json(dir, trace);
    EXPECT_TRUE(report["ended_cleanly"].get<bool>()) << report["warnings"].dump();
    EXPECT_TRUE(report["ledger"].value("balanced", false)) << report["ledger"].dump();
    EXPECT_GE(report["ledger"]["file_live"].get<uint64_t>(), 500u);
}

// An image replaced by exec leaves a trace without End: its ledger is written before the exec,
// with everything its threads recorded, so it is checked all the same.
TEST(Ledger, ATraceEndedByAnExecCarriesItsLedger) {
    ScratchDir dir;
    const std::string trace = dir / "exec.gtrace";
    // The launcher's own trace, kept (run folds launchers' traces into the program's).
    trace_program(dir, trace, {GT_PROGRAM_FORK_EXEC, GT_PROGRAM_EXIT_WITH, "--lines", "1"}, 0, {"--keep-helper-traces"});
    json report = analyze_json(dir, trace);
    EXPECT_FALSE(report["ended_cleanly"].get<bool>());
    EXPECT_TRUE(report["ledger"]["checked"].get<bool>()) << report["ledger"].dump();
    EXPECT_TRUE(report["ledger"].value("balanced", false)) << report["ledger"].dump();
    EXPECT_GE(report["ledger"]["file_live"].get<uint64_t>(), 10u);  // parent_keep's blocks
}

// Waits until `path` holds `text` (the program printed it), at most `limit`.
bool wait_for_output(const std::string& path, const std::string& text, std::chrono::seconds limit = 20s) {
    return eventually([&] { return read_file(path).find(text) != std::string::npos; }, limit);
}

// A process stopped in the middle of its work (SIGSTOP: a debugger, a container paused, a
// machine short of CPU) and resumed: its threads and the tracer's writer stop with it, at any
// point of an event; nothing is lost.
TEST(Ledger, AProcessStoppedAndResumedLosesNoFree) {
    ScratchDir dir;
    trace_program(dir, dir / "small.gtrace", handoff({"--items", "2000"}));
    const std::string out = dir / "program.out";
    const std::string trace = dir / "stopped.gtrace";
    std::string command = fmt::format("exec '{}' run -o '{}' -- '{}' --seconds 3 --keep 30 > '{}'", GT_GROWTRACE, trace,
                                      GT_PROGRAM_HANDOFF, out);
    Spawned run({"/bin/sh", "-c", command}, {.timeout_seconds = 60});
    ASSERT_TRUE(wait_for_output(out, "running pid ")) << read_file(out);
    const std::string text = read_file(out);
    const pid_t pid = static_cast<pid_t>(std::stol(text.substr(text.find("running pid ") + 12)));
    std::this_thread::sleep_for(500ms);
    ASSERT_EQ(kill(pid, SIGSTOP), 0);
    std::this_thread::sleep_for(1s);
    ASSERT_EQ(kill(pid, SIGCONT), 0);
    ProcessResult r = run.wait();
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    const uint64_t baseline = balanced_live(dir, dir / "small.gtrace");
    EXPECT_EQ(balanced_live(dir, trace), baseline + 30);
}

// Attached in the middle of the hand-off (--full): frees of blocks allocated before the attach
// are counted as untraced, not matched to anything; blocks allocated while attached and freed
// after the detach are at most the queue's 64 and those in the consumers' hands.
TEST(LedgerAttach, AnAttachedHandOffBalancesAndHoldsOnlyWhatWasInFlight) {
    ScratchDir dir;
    const std::string out = dir / "program.out";
    std::string command = fmt::format("exec '{}' --seconds 8 > '{}'", GT_PROGRAM_HANDOFF, out);
    Spawned program({"/bin/sh", "-c", command}, {.timeout_seconds = 60});
    ASSERT_TRUE(wait_for_output(out, "running pid")) << read_file(out);
    const std::string trace = dir / "attached.gtrace";
    ProcessResult r = growtrace({"attach", std::to_string(program.pid()), "--full", "-o", trace, "--duration", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    ProcessResult ended = program.wait();
    EXPECT_EQ(ended.exit_code, 0) << ended.describe();
    EXPECT_NE(read_file(out).find("produced"), std::string::npos) << read_file(out);
    EXPECT_LE(balanced_live(dir, trace, Began::Attached), 64u + 8u);
    json ledger = analyze_json(dir, trace)["ledger"];
    EXPECT_GT(ledger["tracer"]["untraced_frees"].get<uint64_t>(), 0u) << "frees of blocks from before the attach";
}

// CPython: objects made by one thread and dropped by another.
class PythonLedger : public ::testing::TestWithParam<std::tuple<PythonUnderTest, std::string>> {};

// Whatever the work, the same objects are live at the end: a run four times as long leaves no
// more (a lost free would leave one per item), and nothing is reported as growing. The short run
// still hands 8,000 objects over: with 3,000, a loaded machine left a request phase of 0.15 s,
// all of it the pool's ramp up to its bounded level (a steady rise, then a teardown), which no
// classifier can tell from growth (Py3_12_asyncio, 1 in about 250 runs).
TEST_P(PythonLedger, ObjectsHandedBetweenThreadsAreAllAccountedFor) {
    const auto& [py, mode] = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    const std::string program = kPythonPrograms + "handoff.py";
    trace_program(dir, dir / "short.gtrace", {py.python, program, mode, "--items", "8000"});
    trace_program(dir, dir / "long.gtrace", {py.python, program, mode, "--items", "32000"});
    const uint64_t short_live = balanced_live(dir, dir / "short.gtrace");
    const uint64_t long_live = balanced_live(dir, dir / "long.gtrace");
    // A lost free leaves a block per item: 24,000 more items would leave thousands more. What
    // does vary between runs is how full the interpreter's free lists are at exit (up to 80
    // dicts and 80 lists each, filled by whichever thread freed last): 61 more blocks were seen
    // once in about 50 runs (Py3_10_queue). 240 is one lost free in a hundred.
    EXPECT_LE(long_live, short_live + 240) << "live at the end grew with the work: frees were lost";
}

// The same hand-offs sampled: balanced, and quiet.
TEST_P(PythonLedger, SampledHandOffsBalanceAndAreQuiet) {
    const auto& [py, mode] = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    if (!py.name.starts_with("3.11") && !py.name.starts_with("3.12")) GTEST_SKIP() << "sampled: 3.11 and 3.12";
    ScratchDir dir;
    trace_program(dir, dir / "sampled.gtrace", {py.python, kPythonPrograms + "handoff.py", mode, "--items", "12000"}, 0,
                  mode_options(TraceMode::Sampled));
    balanced_live(dir, dir / "sampled.gtrace");
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonLedger,
                         ::testing::Combine(::testing::ValuesIn(pythons_under_test()),
                                            ::testing::Values("executor", "queue", "lru", "asyncio")),
                         [](const ::testing::TestParamInfo<std::tuple<PythonUnderTest, std::string>>& info) {
                             ::testing::TestParamInfo<PythonUnderTest> py(std::get<0>(info.param), info.index);
                             return python_test_name(py) + "_" + std::get<1>(info.param);
                         });

// Objects another thread drops while the agent's container walk still holds a reference to them
// are freed inside the walk, by the walk's thread: those frees are the program's and are recorded
// (walk_race.py: two threads churn a bounded cache with the interpreter switching threads at
// nearly every chance; before this was fixed every run lost some, 3 to 188 in six). What is still
// alive at the churn's line at the end is at most what the interpreter's free lists keep (up to
// 80 dicts and 80 lists), plus the last entry of each thread.
class PythonLedgerDuringWalks : public ::testing::TestWithParam<PythonUnderTest> {};

TEST_P(PythonLedgerDuringWalks, ObjectsTheWalkHeldLastAreRecordedFreed) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    const std::string trace = dir / "walks.gtrace";
    trace_program(dir, trace, {py.python, kPythonPrograms + "walk_race.py", "--seconds", "2"});
    json report = analyze_json(dir, trace);
    balanced_live(report, Began::AtStart);
    const int line = python_mark("walk_race.py", "churned_entry");
    double held = 0;
    for (const char* list : {"findings", "groups"})
        for (const json& g : report[list])
            for (const json& f : g.value("frames", json::array()))
                if (f["file"].get<std::string>().ends_with("walk_race.py")) {
                    if (f["line"] == line) held += g["live_allocations"].get<double>();
                    break;
                }
    EXPECT_LE(held, 2 * 80 + 6) << "blocks made at walk_race.py:" << line << " still alive at the end";
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonLedgerDuringWalks, ::testing::ValuesIn(pythons_under_test()),
                         python_test_name);

// Attached to a running CPython 3.11 / 3.12 hand-off (--full).
class PythonLedgerAttach : public ::testing::TestWithParam<PythonUnderTest> {};

TEST_P(PythonLedgerAttach, AnAttachedThreadPoolBalancesAndIsQuiet) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    if (py.name != "3.11" && py.name != "3.12") GTEST_SKIP() << "attached: 3.11 and 3.12";
    ScratchDir dir;
    const std::string out = dir / "program.out";
    std::string command =
        fmt::format("exec '{}' '{}' executor --seconds 10 > '{}'", py.python, kPythonPrograms + "handoff.py", out);
    Spawned program({"/bin/sh", "-c", command}, {.timeout_seconds = 90});
    ASSERT_TRUE(wait_for_output(out, "running")) << read_file(out);
    std::this_thread::sleep_for(500ms);  // past the imports: the thread pool is at work
    const std::string trace = dir / "attached.gtrace";
    ProcessResult r = growtrace({"attach", std::to_string(program.pid()), "--full", "-o", trace, "--duration", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    ProcessResult ended = program.wait();
    EXPECT_EQ(ended.exit_code, 0) << ended.describe() << "\n" << ended.err;
    EXPECT_NE(read_file(out).find("done executor"), std::string::npos) << read_file(out);
    balanced_live(dir, trace, Began::Attached);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonLedgerAttach, ::testing::ValuesIn(pythons_under_test()), python_test_name);

}  // namespace
}  // namespace growtrace::e2e
