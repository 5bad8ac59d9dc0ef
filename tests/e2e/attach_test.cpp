// `growtrace attach PID` / `growtrace detach PID` on running programs: the target keeps running
// and printing, the trace shows the growth made while attached (with Python frames for a
// CPython target), a second attach works, and every bad input is one clear error with exit 2.
#include <fcntl.h>
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "e2e_support.h"
#include "report_view.h"

namespace growtrace::e2e {
namespace {

using namespace std::chrono_literals;

// A program started with its stdout going to a file we can read while it runs.
class Service {
public:
    Service(const ScratchDir& dir, const std::vector<std::string>& argv) : out_(dir / "service.out") {
        std::string command = "exec";
        for (const std::string& a : argv) command += " '" + a + "'";
        command += " > '" + out_ + "' 2> '" + out_ + ".err'";
        spawned_ = std::make_unique<Spawned>(std::vector<std::string>{"/bin/sh", "-c", command}, RunOptions{.timeout_seconds = 60});
    }
    ~Service() {
        if (alive()) kill(pid(), SIGKILL);
        spawned_->wait();
    }
    pid_t pid() const { return spawned_->pid(); }
    bool alive() const { return pid() > 0 && kill(pid(), 0) == 0 && !zombie(); }  // pid is -1 once waited for
    bool zombie() const {
        std::ifstream stat("/proc/" + std::to_string(pid()) + "/stat");
        std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
        size_t paren = text.rfind(')');
        return paren == std::string::npos || text.substr(paren + 2, 1) == "Z";
    }
    std::vector<std::string> lines() const {
        std::ifstream in(out_);
        std::vector<std::string> result;
        std::string line;
        while (std::getline(in, line)) result.push_back(line);
        return result;
    }
    std::string err() const { return read_file(out_ + ".err"); }
    // Waits until the program ends by itself (at most the 60 s it was started with).
    ProcessResult wait_to_end() { return spawned_->wait(); }
    // For a failed alive(): how the program ended (exit code or signal) and what it printed
    // to stderr, so a failure on a machine we cannot log in to says what happened.
    std::string how_it_ended() {
        if (alive()) return "still running";
        ProcessResult r = spawned_->wait();
        return fmt::format("the program ended: {}, stderr:\n{}", r.describe(), err());
    }
    // Waits until the program printed `count` lines (it is then past its start-up).
    bool wait_for_lines(size_t count, std::chrono::seconds limit = 10s) const {
        return eventually([&] { return lines().size() >= count; }, limit);
    }
    void stop() {
        if (pid() > 0) kill(pid(), SIGTERM);
        spawned_->wait();
    }

private:
    std::string out_;
    std::unique_ptr<Spawned> spawned_;
};

// Every line is "tick N ..." with N counting up from 0 without a gap.
void expect_ticks_in_order(const std::vector<std::string>& lines, const std::regex& form) {
    for (size_t i = 0; i < lines.size(); ++i) {
        std::smatch m;
        ASSERT_TRUE(std::regex_match(lines[i], m, form)) << "line " << i << ": " << lines[i];
        EXPECT_EQ(std::stoul(m[1]), i) << lines[i];
    }
}

TEST(Attach, NativeGrowthIsFlaggedAndTheProgramRunsOn) {
    ScratchDir dir;
    Service service(dir, {GT_PROGRAM_LONG_RUNNING, "30"});
    ASSERT_TRUE(service.wait_for_lines(5)) << service.err();
    const std::string trace = dir / "attached.gtrace";
    // --full: exact figures (attach samples by default).
    ProcessResult r = growtrace({"attach", std::to_string(service.pid()), "--full", "-o", trace, "--duration", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    EXPECT_NE(r.err.find("attached to process"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("(every allocation)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("detached from process"), std::string::npos) << r.err;

    // Alive and still printing after the detach.
    ASSERT_TRUE(service.alive()) << service.how_it_ended();
    size_t printed = service.lines().size();
    ASSERT_TRUE(service.wait_for_lines(printed + 3)) << service.err();
    EXPECT_TRUE(service.alive()) << service.how_it_ended();
    service.stop();
    expect_ticks_in_order(service.lines(), std::regex(R"(tick (\d+) sessions \d+ check \d+)"));
    EXPECT_EQ(service.err(), "");

    Report report(analyze_json(dir, trace));
    auto site = report.stack_at("remember_session", "long_running.cpp", marker_line("long_running.cpp", "remember_session"));
    ASSERT_TRUE(site) << report.summary();
    EXPECT_TRUE(site->flagged) << report.summary();
    // Blocks of 4096 bytes, 8 per tick, never freed: about 20 ticks of 2 s.
    EXPECT_EQ(site->live_bytes, site->live_count * 4096);
    EXPECT_EQ(site->allocations, site->live_count);
    EXPECT_EQ(site->live_count % 8, 0u) << site->live_count;  // whole ticks: attach and detach happen while it sleeps
    EXPECT_GE(site->live_count, 8u * 10);
    EXPECT_LE(site->live_count, 8u * 60);
    // The program frees one start-up block per tick: those frees match nothing and count
    // nowhere. Retained = the sessions (the per-tick scratch block is freed each tick).
    EXPECT_EQ(report.total("retained_bytes"), site->live_bytes) << report.summary();
    EXPECT_EQ(report.total("live_allocations"), site->live_count);
}

// --sample reaches an attached process (whose environment knows nothing of it): its trace says
// how it was sampled.
TEST(Attach, SampleSizeReachesTheAttachedProcess) {
    ScratchDir dir;
    Service service(dir, {GT_PROGRAM_LONG_RUNNING, "30"});
    ASSERT_TRUE(service.wait_for_lines(3)) << service.err();
    const std::string trace = dir / "sampled.gtrace";
    ProcessResult r = growtrace({"attach", std::to_string(service.pid()), "--sample", "64K", "-o", trace, "--duration", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    EXPECT_NE(r.err.find("(sampled, one every 64K bytes on average)"), std::string::npos) << r.err;
    ProcessResult dump = growtrace({"dump", trace});
    EXPECT_NE(dump.out.find("Sampling mean_bytes=65536 "), std::string::npos) << dump.out.substr(0, 2000);
    EXPECT_EQ(analyze_json(dir, trace)["sampling"]["mean_bytes"], 65536);
    service.stop();
    EXPECT_EQ(service.err(), "");
}

// A single-threaded program nearly always inside malloc: gdb's calls for the tracer must wait
// until the allocator call returns (glibc takes no lock in a single-threaded process, so
// running dlopen there would corrupt its heap). Attached three times, it keeps running and
// every trace is complete.
TEST(Attach, ASingleThreadBusyInMallocIsAttachedOnlyOutsideIt) {
    ScratchDir dir;
    Service service(dir, {GT_PROGRAM_MALLOC_SPINNER, "40"});
    ASSERT_TRUE(service.wait_for_lines(3)) << service.err();
    int waited = 0;
    for (const std::string name : {"a.gtrace", "b.gtrace", "c.gtrace"}) {
        ProcessResult r =
            growtrace({"attach", std::to_string(service.pid()), "--full", "-o", dir / name, "--duration", "1"});
        ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err << "\n" << service.err();
        waited += r.err.find("was inside its allocator: let it run until it left") != std::string::npos;
        ASSERT_TRUE(service.alive()) << service.err();
        ASSERT_TRUE(service.wait_for_lines(service.lines().size() + 3)) << service.err();
        nlohmann::json json = analyze_json(dir, dir / name);
        EXPECT_TRUE(json.value("ended_cleanly", false)) << name;
        EXPECT_GT(json["totals"]["allocations"].get<uint64_t>(), 1000u) << name;
    }
    EXPECT_GE(waited, 1) << "gdb never found the program inside malloc: the case this test is for did not arise";
    service.stop();
    EXPECT_EQ(service.err(), "");
    expect_ticks_in_order(service.lines(), std::regex(R"(tick (\d+) blocks \d+)"));
}

TEST(Attach, DetachVerbAndASecondAttachEachWriteACompleteTrace) {
    ScratchDir dir;
    Service service(dir, {GT_PROGRAM_LONG_RUNNING, "40"});
    ASSERT_TRUE(service.wait_for_lines(3)) << service.err();
    const std::string pid = std::to_string(service.pid());
    for (const std::string name : {"first.gtrace", "second.gtrace"}) {
        ProcessResult a = growtrace({"attach", pid, "--full", "-o", dir / name, "--no-wait"});
        ASSERT_EQ(a.exit_code, 0) << a.describe() << "\n" << a.err;
        ASSERT_TRUE(service.wait_for_lines(service.lines().size() + 6)) << service.err();  // 8 sessions a tick
        ProcessResult d = growtrace({"detach", pid});
        ASSERT_EQ(d.exit_code, 0) << d.describe() << "\n" << d.err;
        EXPECT_NE(d.err.find(dir / name), std::string::npos) << d.err;  // names the trace it closed
        nlohmann::json json = analyze_json(dir, dir / name);
        EXPECT_TRUE(json.value("ended_cleanly", false)) << name;
        Report report(json);
        auto site = report.stack_at("remember_session", "long_running.cpp", -1);
        ASSERT_TRUE(site) << name << ": " << report.summary();
        EXPECT_GE(site->live_count, 8u * 5) << name;
    }
    ProcessResult again = growtrace({"detach", pid});
    EXPECT_EQ(again.exit_code, 2);
    EXPECT_NE(again.err.find("growtrace: error: process " + pid + " is not attached"), std::string::npos) << again.err;
    EXPECT_TRUE(service.alive()) << service.how_it_ended();
    service.stop();
    expect_ticks_in_order(service.lines(), std::regex(R"(tick (\d+) sessions \d+ check \d+)"));
}

// The state letter of /proc/PID/stat ('R', 'S', 'T'...).
char process_state(pid_t pid) {
    std::string stat = read_file(fmt::format("/proc/{}/stat", pid));
    size_t paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

// A process stopped with SIGSTOP (50 threads, like the service in the report that crashed after
// a SIGCONT) is refused with one line and left stopped and whole: after SIGCONT it prints on,
// and an attach then works.
TEST(Attach, AStoppedProcessIsRefusedAndLeftAsItWas) {
    ScratchDir dir;
    Service service(dir, {GT_PROGRAM_LONG_RUNNING, "30", "49"});
    ASSERT_TRUE(service.wait_for_lines(3)) << service.err();
    const std::string pid = std::to_string(service.pid());
    ASSERT_EQ(kill(service.pid(), SIGSTOP), 0);
    ASSERT_TRUE(eventually([&] { return process_state(service.pid()) == 'T'; }));
    ProcessResult r = growtrace({"attach", pid, "-o", dir / "stopped.gtrace"});
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(r.err, "growtrace: error: process " + pid + " is stopped (T (stopped): SIGSTOP, Ctrl-Z or a job control "
                     "stop); the tracer has to run in it to start: continue it first (kill -CONT " + pid +
                     "), then run this again\n");
    EXPECT_FALSE(fs::exists(dir / "stopped.gtrace"));
    EXPECT_EQ(process_state(service.pid()), 'T') << "no longer stopped";
    size_t printed = service.lines().size();
    ASSERT_EQ(kill(service.pid(), SIGCONT), 0);
    ASSERT_TRUE(service.wait_for_lines(printed + 5)) << service.err();
    ProcessResult again = growtrace({"attach", pid, "-o", dir / "running.gtrace", "--duration", "1"});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    ASSERT_TRUE(service.wait_for_lines(service.lines().size() + 3)) << service.err();
    EXPECT_TRUE(service.alive()) << service.how_it_ended();
    service.stop();
    EXPECT_EQ(service.err(), "");
    expect_ticks_in_order(service.lines(), std::regex(R"(tick (\d+) sessions \d+ check \d+)"));
    EXPECT_TRUE(analyze_json(dir, dir / "running.gtrace").value("ended_cleanly", false));
}

// The child of `pid` running `name` (a shell pipeline's second command).
pid_t child_named(pid_t pid, const std::string& name, std::chrono::seconds limit = 5s) {
    pid_t found = -1;
    eventually(
        [&] {
            std::istringstream children(read_file(fmt::format("/proc/{}/task/{}/children", pid, pid)));
            for (pid_t child; children >> child;)
                if (read_file(fmt::format("/proc/{}/comm", child)) == name + "\n") found = child;
            return found > 0;
        },
        limit);
    return found;
}

// sqlite3's shell fed statements through a pipe at full speed: one thread, always inside read()
// under stdio or inside malloc. gdb may run the tracer's start-up only when it is out of both:
// whether it catches such a moment or not, the attach ends within its bound with one clear
// outcome and the program runs on, its output unbroken.
TEST(Attach, ASingleThreadReadingFastInputGetsABoundedClearAnswer) {
    ScratchDir dir;
    std::string out = dir / "reader.out";
    Spawned shell({"/bin/sh", "-c", fmt::format("yes 'insert into t values (1, 2, 3);' | exec '{}' > '{}' 2>&1",
                                                GT_PROGRAM_INPUT_READER, out)},
                  {.timeout_seconds = 120});
    pid_t reader = child_named(shell.pid(), "input_reader");
    ASSERT_GT(reader, 0);
    ASSERT_TRUE(eventually([&] { return read_file(out).find("tick 2 ") != std::string::npos; }))
        << "the reader prints nothing";
    ProcessResult r = growtrace(
        {"attach", std::to_string(reader), "-o", dir / "fast.gtrace", "--duration", "1", "--max-wait", "3"});
    if (r.exit_code == 0) {
        EXPECT_NE(r.err.find("detached from process"), std::string::npos) << r.err;
        nlohmann::json json = analyze_json(dir, dir / "fast.gtrace");
        EXPECT_TRUE(json.value("ended_cleanly", false)) << r.err;
    } else {
        EXPECT_EQ(r.exit_code, 2) << r.describe() << "\n" << r.err;
        EXPECT_NE(r.err.find("growtrace: error: process " + std::to_string(reader) + " stayed inside"), std::string::npos)
            << r.err;
    }
    const size_t before = read_file(out).size();
    EXPECT_TRUE(eventually([&] { return read_file(out).size() > before; })) << "the reader stopped printing";
    EXPECT_EQ(kill(reader, 0), 0) << "the reader died: " << read_file(out);
    kill(reader, SIGTERM);
    shell.wait();
    std::istringstream lines(read_file(out));
    std::string line;
    for (unsigned long expected = 0; std::getline(lines, line); ++expected)
        ASSERT_TRUE(line.starts_with(fmt::format("tick {} lines ", expected))) << line;
}

// The only thread is blocked in read() under stdio (its input paused): the tracer's start-up
// may not run there, so attach waits a bounded time saying what for, then refuses, and the
// program, given the rest of its input, ends as it would have.
TEST(Attach, ASingleThreadBlockedInsideStdioIsRefusedAfterABoundedWait) {
    ScratchDir dir;
    std::string fifo = dir / "input";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    std::string out = dir / "reader.out";
    Spawned shell({"/bin/sh", "-c", fmt::format("exec '{}' < '{}' > '{}' 2>&1", GT_PROGRAM_INPUT_READER, fifo, out)},
                  {.timeout_seconds = 120});
    int input = open(fifo.c_str(), O_WRONLY);
    ASSERT_GE(input, 0);
    ASSERT_EQ(write(input, "a\nb\n", 4), 4);
    // Its first line read, it prints a tick and goes back to reading: blocked inside stdio.
    ASSERT_TRUE(eventually([&] { return read_file(out).find("tick 0") != std::string::npos; }, 20s)) << read_file(out);
    ProcessResult r = growtrace({"attach", std::to_string(shell.pid()), "-o", dir / "blocked.gtrace", "--max-wait", "2"});
    EXPECT_EQ(r.exit_code, 2) << r.describe() << "\n" << r.err;
    EXPECT_NE(r.err.find("is inside _IO_"), std::string::npos) << r.err;  // says what it waits for, at once
    EXPECT_NE(r.err.find("letting it run until that call returns (at most 2 s)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("growtrace: error: process " + std::to_string(shell.pid()) + " stayed inside _IO_"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(" for 2 s, "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("nothing was loaded and the process runs on as it was"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "blocked.gtrace"));
    EXPECT_EQ(read_file("/proc/" + std::to_string(shell.pid()) + "/maps").find("libgrowtrace"), std::string::npos);
    ASSERT_EQ(write(input, "c\nd\n", 4), 4);
    close(input);
    ProcessResult done = shell.wait();
    EXPECT_EQ(done.exit_code, 0) << done.describe();
    std::string text = read_file(out);
    EXPECT_TRUE(text.ends_with("done lines 4\n")) << text;
}

// The tick lines of attach_growth.py: "tick N sessions S types T gc_callbacks G".
struct PythonTick {
    unsigned tick = 0, types = 0, gc_callbacks = 0;
};

std::vector<PythonTick> python_ticks(const Service& service) {
    static const std::regex form(R"(tick (\d+) sessions \d+ types (\d+) gc_callbacks (\d+))");
    std::vector<PythonTick> ticks;
    for (const std::string& line : service.lines()) {
        std::smatch m;
        EXPECT_TRUE(std::regex_match(line, m, form)) << line;
        if (!m.empty()) ticks.push_back({static_cast<unsigned>(std::stoul(m[1])), static_cast<unsigned>(std::stoul(m[2])),
                                         static_cast<unsigned>(std::stoul(m[3]))});
    }
    return ticks;
}

// What attach_growth.py grew while attached: the dict (with its Python frame) and the
// lru_cache made before the attach, keyed on a new class named Record each tick.
void expect_attach_growth_findings(const nlohmann::json& json, const std::string& name) {
    Report report(json);
    auto site = report.stack_at("remember_session", "attach_growth.py", python_mark("attach_growth.py", "remember_session"));
    ASSERT_TRUE(site) << name << ": " << report.summary();
    EXPECT_TRUE(site->flagged) << name << ": " << report.summary();
    EXPECT_GE(site->live_bytes, 8u * 4096 * 10) << name;

    auto caches = findings_of_kind(json, "cache_growth");
    ASSERT_EQ(caches.size(), 1u) << name << ": " << json["findings"].dump().substr(0, 2000);
    const nlohmann::json& cache = caches[0]["cache"];
    EXPECT_EQ(cache["name"], "__main__.describe_type") << name;
    EXPECT_EQ(cache["location"], kPythonPrograms + "attach_growth.py:" +
                                     std::to_string(python_mark("attach_growth.py", "describe_type_created")))
        << name;
    EXPECT_TRUE(cache["maxsize"].is_null()) << name;
    EXPECT_GE(cache["entries_first"].get<int>(), 5) << name << ": the cache was filling before the attach";
    EXPECT_GE(cache["entries_last"].get<int>() - cache["entries_first"].get<int>(), 10) << name;
    EXPECT_GT(cache["retained_bytes"].get<uint64_t>(), 10u * 4 * 2048) << name;
    EXPECT_TRUE(has_frame(cache["inserted_from"], "main", "attach_growth.py")) << name << cache["inserted_from"].dump();
    bool record = false;
    for (const nlohmann::json& k : cache["key_types"]) {
        if (k["name"] != "__main__.Record") continue;
        record = true;
        EXPECT_GE(k["distinct_classes"].get<int>(), 10) << name << k.dump();
    }
    EXPECT_TRUE(record) << name << cache["key_types"].dump();
}

class AttachPython : public ::testing::TestWithParam<PythonUnderTest> {};

// Two attaches in turn to one Python service: each trace holds the growth made while it was
// attached, the agent comes and goes with each without the program seeing it in gc.callbacks,
// and the program's own cache keeps working throughout.
TEST_P(AttachPython, CacheAndDictGrowthWhileAttachedThenTheProgramIsAsBefore) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    Service service(dir, {py.python, kPythonPrograms + "attach_growth.py", "40"});
    ASSERT_TRUE(service.wait_for_lines(8)) << service.err();
    const std::string pid = std::to_string(service.pid());
    for (const std::string name : {"first.gtrace", "second.gtrace"}) {
        // --full: the dict's few kilobytes per tick are too few to sample.
        ProcessResult r = growtrace({"attach", pid, "--full", "-o", dir / name, "--duration", "2"});
        ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
        EXPECT_NE(r.err.find("CPython " + py.name.substr(0, 4) + ": the agent"), std::string::npos) << r.err;
        ASSERT_TRUE(service.alive()) << service.how_it_ended();
        ASSERT_TRUE(service.wait_for_lines(service.lines().size() + 5)) << service.err();
        nlohmann::json json = analyze_json(dir, dir / name);
        EXPECT_TRUE(json.value("ended_cleanly", false)) << name;
        expect_attach_growth_findings(json, name);
    }
    service.stop();
    EXPECT_EQ(service.err(), "");

    std::vector<PythonTick> ticks = python_ticks(service);
    std::vector<unsigned> callbacks_runs;  // gc.callbacks length, one entry per run of equal values
    for (size_t i = 0; i < ticks.size(); ++i) {
        EXPECT_EQ(ticks[i].tick, i);
        EXPECT_EQ(ticks[i].types, i + 1) << "every call missed and was stored, attached or not";
        if (callbacks_runs.empty() || callbacks_runs.back() != ticks[i].gc_callbacks)
            callbacks_runs.push_back(ticks[i].gc_callbacks);
    }
    EXPECT_EQ(callbacks_runs, (std::vector<unsigned>{0}));
}

// A first attach to a CPython process that fails after the tracer set up its Python side (the
// interpreter's code object destructor is watched from inside the library) leaves the program
// running as it was once the library is unloaded: before, the next code object the program
// freed called into the unloaded library and the process died.
TEST_P(AttachPython, AFailedFirstAttachLeavesTheProgramRunning) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    for (const std::string step : {"begin", "patch"}) {
        ScratchDir dir;
        Service service(dir, {"/usr/bin/env", "GROWTRACE_TEST_ATTACH_FAIL=" + step, py.python,
                              kPythonPrograms + "compile_loop.py", "30"});
        ASSERT_TRUE(service.wait_for_lines(3)) << service.err();
        ProcessResult r = growtrace({"attach", std::to_string(service.pid()), "--full", "-o", dir / "failed.gtrace"});
        EXPECT_EQ(r.exit_code, 2) << step << ": " << r.describe() << "\n" << r.err;
        EXPECT_NE(r.err.find("what attach loaded was unloaded"), std::string::npos) << r.err;
        size_t printed = service.lines().size();
        ASSERT_TRUE(service.wait_for_lines(printed + 5)) << step << ": " << service.how_it_ended();
        EXPECT_TRUE(service.alive()) << step << ": " << service.how_it_ended();
        service.stop();
        EXPECT_EQ(service.err(), "") << step;
    }
}

// Attached, the agent does not show in gc.callbacks: every round of gc_callbacks_seen.py (what
// it sees of gc.callbacks and how its callbacks are called), before, during and after the
// attach, prints what an untraced run prints; and the agent reported the rounds' full
// collections while it was there. The rounds run between the attach and the detach, not
// across them (docs/cpython.md: what a program in the middle of using gc.callbacks sees then).
TEST_P(AttachPython, ProgramSeesTheGcCallbacksItWouldUntraced) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    ProcessResult untraced = run_process({py.python, kPythonPrograms + "gc_callbacks_seen.py", "1"},
                                         {.cwd = dir.path().string()});
    ASSERT_EQ(untraced.exit_code, 0) << untraced.err;
    std::vector<std::string> expected = gc_callbacks_seen(untraced.out);
    ASSERT_EQ(expected.size(), 1u) << untraced.out;
    const std::string go = dir / "go";
    size_t round = 0;
    // Without container walks: the walk at the detach runs on a thread of the library, and
    // while it runs (the program's thread may take the GIL in between) the containers it is
    // looking at, gc.callbacks among the module-level lists, have one referrer more.
    Service service(dir, {"/usr/bin/env", "GROWTRACE_CONTAINERS=0", py.python, kPythonPrograms + "gc_callbacks_seen.py",
                          "7", "0", go});
    auto rounds = [&](size_t n) {
        for (size_t end = round + n; round < end; ++round) {
            write_file(go + "." + std::to_string(round), "");
            ASSERT_TRUE(service.wait_for_lines(round + 1, 30s)) << service.err();
        }
    };
    rounds(2);
    const std::string trace = dir / "seen.gtrace";
    Spawned attach({GT_GROWTRACE, "attach", std::to_string(service.pid()), "--full", "-o", trace, "--duration", "6"},
                   {.timeout_seconds = 60});
    // The agent's extension loaded (its Module record in the trace), then time for it to start.
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline &&
           (!fs::exists(trace) || growtrace({"dump", trace}).out.find("_growtrace_agent") == std::string::npos))
        std::this_thread::sleep_for(100ms);
    std::this_thread::sleep_for(1500ms);
    rounds(3);
    ProcessResult attached = attach.wait();
    ASSERT_EQ(attached.exit_code, 0) << attached.describe() << "\n" << attached.err;
    ASSERT_TRUE(service.alive()) << service.how_it_ended();
    rounds(2);
    service.stop();
    EXPECT_EQ(service.err(), "");
    std::vector<std::string> lines = service.lines();
    ASSERT_EQ(lines.size(), 7u);
    for (size_t i = 0; i < lines.size(); ++i)
        EXPECT_EQ(gc_callbacks_seen(lines[i] + "\n"), expected) << "round " << i;
    // Two gc.collect() a round; the three rounds while attached were reported.
    EXPECT_GE(reported_full_collections(growtrace({"dump", trace}).out), 6u);
}

// A module-level dict keyed on request ids that grows while attached: the agent's walks run in
// the attached process too, and name it by its path.
TEST_P(AttachPython, GrowingModuleDictIsNamedWhileAttached) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    Service service(dir, {py.python, kPythonPrograms + "containers.py", "--case", "request_cache", "--count", "400000",
                          "--print-ticks"});
    ASSERT_TRUE(service.wait_for_lines(3)) << service.err();
    ProcessResult r = growtrace({"attach", std::to_string(service.pid()), "--full", "-o", dir / "c.gtrace", "--duration", "4"});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    ASSERT_TRUE(service.alive()) << service.how_it_ended();
    nlohmann::json json = analyze_json(dir, dir / "c.gtrace");
    bool named = false;
    for (const nlohmann::json& f : findings_of_kind(json, "container_growth")) {
        if (f["container"]["name"] != "__main__._RESPONSES") continue;
        named = true;
        EXPECT_TRUE(has_frame(f["container"]["inserted_from"], "store_response", "containers.py",
                              python_mark("containers.py", "response_store")))
            << f["container"]["inserted_from"].dump();
    }
    EXPECT_TRUE(named) << json["findings"].dump().substr(0, 2000) << json["containers"].dump().substr(0, 2000);
    service.stop();
}

// The compiled extensions users load most (test_programs/python/compiled_extensions.py "all":
// grpcio's server and channel, protobuf, numpy, pandas, psycopg2's libpq, lxml, cryptography,
// ...), imported and used while attached with every allocation traced: the same output and
// status as untraced, and a trace that ends cleanly (their types are made ready under the
// attached library's hooks).
TEST_P(AttachPython, CompiledExtensionsImportedWhileAttachedWorkAsUntraced) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, true);
    ScratchDir dir;
    const std::string program = kPythonPrograms + "compiled_extensions.py";
    ProcessResult untraced = run_process({py.python, program, "all"}, {.cwd = dir.path().string()});
    if (untraced.exit_code != 0)
        GTEST_SKIP() << "the extension packages are not all installed for CPython " << py.name
                     << " (tools/setup_python.sh installs tools/python_extensions_requirements.txt): "
                     << untraced.err.substr(0, 300);
    const std::string go = dir / "go";
    Service service(dir, {py.python, program, "all", "--after", go});
    ASSERT_TRUE(service.wait_for_lines(1, 30s)) << service.err();
    const std::string trace = dir / "ext.gtrace";
    ProcessResult attach = growtrace({"attach", std::to_string(service.pid()), "--full", "--no-wait", "-o", trace});
    ASSERT_EQ(attach.exit_code, 0) << attach.describe() << "\n" << attach.err;
    write_file(go, "");
    ProcessResult traced = service.wait_to_end();
    EXPECT_EQ(traced.signal, 0) << service.err();
    EXPECT_EQ(traced.exit_code, 0) << service.err();
    std::vector<std::string> lines = service.lines();
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.front(), "ready");
    std::string out;
    for (size_t i = 1; i < lines.size(); ++i) out += lines[i] + "\n";
    EXPECT_EQ(out, untraced.out);
    EXPECT_TRUE(analyze_json(dir, trace).value("ended_cleanly", false));
}

// CPython 3.12+ warns at os.fork() in a process of more than one thread: an attached program of
// one thread that forks is not warned (the writer, the only tracer thread, leaves for the
// fork; objects loaded later are patched by it, not by a thread of their own), and its
// children are traced.
TEST_P(AttachPython, AProgramOfOneThreadThatForksWhileAttachedIsNotWarned) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    if (py.name < "3.12") GTEST_SKIP() << "CPython " << py.name << " does not warn at fork";
    ScratchDir dir;
    const std::string go = dir / "go";
    Service service(dir, {py.python, "-W", "always", kPythonPrograms + "fork_alone.py", "0", go});
    ASSERT_TRUE(service.wait_for_lines(1)) << service.err();
    const std::string trace = dir / "forks.gtrace";
    Spawned attach({GT_GROWTRACE, "attach", std::to_string(service.pid()), "--full", "-o", trace, "--duration", "4"},
                   {.timeout_seconds = 60});
    eventually([&] { return fs::exists(trace); }, 20s);
    std::this_thread::sleep_for(300ms);  // past the attach's own start (the agent's thread)
    write_file(go, "");
    ASSERT_TRUE(service.wait_for_lines(4)) << service.err();
    ProcessResult attached = attach.wait();
    EXPECT_EQ(attached.exit_code, 0) << attached.err;
    fs::remove(go);
    ASSERT_TRUE(service.wait_for_lines(5)) << service.err();
    EXPECT_EQ(service.lines().back(), "fork_alone: 120 blocks kept, 1 thread(s)");
    EXPECT_EQ(service.err().find("is multi-threaded"), std::string::npos) << service.err();
    size_t child_traces = 0;
    for (const auto& entry : fs::directory_iterator(dir.path()))
        if (entry.path().filename().string().starts_with("forks.") && entry.path() != fs::path(trace)) ++child_traces;
    EXPECT_EQ(child_traces, 3u);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, AttachPython, ::testing::ValuesIn(pythons_under_test()), python_test_name);

// openai #2672 attached after start-up, sampled as attach does by default (512K), on every
// version: the cache made at import time is probed in place and the finding is the one
// `growtrace run` gives (python_test.cpp), with the memory it holds estimated.
class AttachOpenAI : public ::testing::TestWithParam<PythonUnderTest> {};

TEST_P(AttachOpenAI, OpenAIReproductionAttachedAfterStartUpGivesTheCacheGrowthFinding) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, true);
    ScratchDir dir;
    Service service(dir, {py.python, kPythonPrograms + "openai_repro/repro.py", "--mode", "threads", "--requests",
                          "100000", "--progress"});
    ASSERT_TRUE(service.wait_for_lines(10, 60s)) << service.err();
    const std::string trace = dir / "openai.gtrace";
    ProcessResult r = growtrace({"attach", std::to_string(service.pid()), "-o", trace, "--duration", "6"});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    EXPECT_NE(r.err.find("sampled, one every 512K bytes on average"), std::string::npos) << r.err;
    size_t printed = service.lines().size();
    ASSERT_TRUE(service.wait_for_lines(printed + 3)) << service.err();
    service.stop();
    static const std::regex progress(R"(request (\d+) cache_currsize=(\d+))");
    unsigned previous = 0;
    for (const std::string& line : service.lines()) {
        std::smatch m;
        ASSERT_TRUE(std::regex_match(line, m, progress)) << line;
        EXPECT_EQ(std::stoul(m[1]), previous + 1) << line;
        previous = static_cast<unsigned>(std::stoul(m[1]));
    }

    nlohmann::json json = analyze_json(dir, trace);
    EXPECT_EQ(json["sampling"]["mean_bytes"], 512 * 1024);
    auto caches = findings_of_kind(json, "cache_growth");
    ASSERT_EQ(caches.size(), 1u) << json["findings"].dump().substr(0, 2000);
    EXPECT_EQ(json["findings"][0]["kind"], "cache_growth") << "the cache finding leads the report";
    const nlohmann::json& cache = caches[0]["cache"];
    EXPECT_EQ(cache["name"], "openai._models._CachedTypeAdapter");
    EXPECT_NE(cache["location"].get<std::string>().find("openai/_models.py:"), std::string::npos) << cache["location"];
    EXPECT_TRUE(cache["maxsize"].is_null());
    EXPECT_GE(cache["entries_first"].get<int>(), 20) << "it had grown before the attach";
    EXPECT_GE(cache["entries_last"].get<int>() - cache["entries_first"].get<int>(), 20);  // 2 per request
    EXPECT_GT(cache["retained_bytes"].get<uint64_t>(), 1'000'000u);
    EXPECT_TRUE(has_frame(cache["inserted_from"], "_validate_non_model_type", "openai/_models.py"))
        << cache["inserted_from"].dump();
    bool generated = false;
    for (const nlohmann::json& k : cache["key_types"]) {
        if (k["name"] != "openai.types.responses.parsed_response.ParsedResponseOutputMessage[Fact]") continue;
        generated = true;
        EXPECT_GE(k["distinct_classes"].get<int>(), 10) << k.dump();
        EXPECT_GE(k["live_classes"].get<int>(), 10) << k.dump();
    }
    EXPECT_TRUE(generated) << cache["key_types"].dump();
}

INSTANTIATE_TEST_SUITE_P(Interpreters, AttachOpenAI, ::testing::ValuesIn(pythons_under_test()), python_test_name);

// While attached, what libc allocates for the program (strdup, asprintf, getline...) is seen as
// under `growtrace run`: libc calls malloc & co through its own GOT, which the attach redirects
// too (test_programs/native/libc_internal.cpp keeps such blocks every tick).
TEST(AttachLibc, AllocationsMadeInsideLibcAreSeen) {
    ScratchDir dir;
    Service service(dir, {GT_PROGRAM_LIBC_INTERNAL, "30"});
    ASSERT_TRUE(service.wait_for_lines(5)) << service.err();
    const std::string trace = dir / "libc.gtrace";
    ProcessResult r = growtrace({"attach", std::to_string(service.pid()), "--full", "-o", trace, "--duration", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    ASSERT_TRUE(service.alive()) << service.how_it_ended();
    size_t printed = service.lines().size();
    ASSERT_TRUE(service.wait_for_lines(printed + 3)) << service.err();
    service.stop();
    expect_ticks_in_order(service.lines(), std::regex(R"(tick (\d+) kept \d+ check \d+)"));
    EXPECT_EQ(service.err(), "");

    nlohmann::json json = analyze_json(dir, trace);
    Report report(json);
    auto own = report.stack_in("keep_own");
    ASSERT_TRUE(own) << report.summary();
    ASSERT_GE(own->live_count, 10u);
    // Each tick: 4 strdup'ed lines of 2000 bytes, 2 asprintf'ed ones, 2 getline'd ones, kept.
    auto strdups = report.stack_in("keep_strdups");
    ASSERT_TRUE(strdups) << "strdup's allocations are not seen while attached\n" << report.summary();
    EXPECT_EQ(strdups->live_count, 4 * own->live_count);
    EXPECT_EQ(strdups->live_bytes, 4 * 2000 * own->live_count);
    auto asprintfs = report.stack_in("keep_asprintfs");
    ASSERT_TRUE(asprintfs) << report.summary();
    EXPECT_EQ(asprintfs->live_count, 2 * own->live_count);
    auto getlines = report.stack_in("keep_getlines");
    ASSERT_TRUE(getlines) << report.summary();
    EXPECT_GE(getlines->live_count, 2 * own->live_count);
    // getline grows a block the program allocated: its free inside libc is seen, so no
    // allocation is freed unseen; the program's frees of strdup'ed blocks from before the
    // attach match nothing and count nowhere.
    EXPECT_TRUE(json["ledger"].value("balanced", false)) << json["ledger"].dump();
    EXPECT_EQ(json["ledger"]["tracer"]["inferred_frees"], 0) << json["ledger"].dump();
    EXPECT_GE(json["ledger"]["tracer"]["untraced_frees"].get<int>(), 10) << json["ledger"].dump();
    EXPECT_EQ(report.total("unmatched_frees"), 0u);
}

// What a failed attach must leave as it found: the files mapped, the descriptors and the
// threads of the process.
struct ProcessState {
    std::set<std::string> mapped_files;
    size_t anonymous_mappings = 0;
    std::map<std::string, std::string> descriptors;  // fd -> what it is
    size_t threads = 0;
};

ProcessState state_of(pid_t pid) {
    ProcessState state;
    const std::string proc = "/proc/" + std::to_string(pid);
    std::ifstream maps(proc + "/maps");
    for (std::string line; std::getline(maps, line);) {
        size_t slash = line.find('/');
        if (slash != std::string::npos) state.mapped_files.insert(line.substr(slash));
        else if (line.find('[') == std::string::npos) ++state.anonymous_mappings;
    }
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator(proc + "/fd", ec))
        state.descriptors[fd.path().filename()] = std::filesystem::read_symlink(fd.path(), ec).string();
    for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator(proc + "/task", ec)) ++state.threads;
    return state;
}

std::string describe(const ProcessState& s) {
    std::string text = fmt::format("{} threads, {} anonymous mappings, descriptors:", s.threads, s.anonymous_mappings);
    for (const auto& [fd, what] : s.descriptors) text += " " + fd + "=" + what;
    text += "\nfiles mapped:";
    for (const auto& file : s.mapped_files) text += "\n  " + file;
    return text;
}

// A start that fails once the trace began (its file open, its writer thread running), or while
// redirecting (more call sites than the table holds), leaves the process as it was: the library
// unloaded, no GOT slot changed, no thread or descriptor left, no trace file; the program runs
// on. The failure is made on purpose by GROWTRACE_TEST_ATTACH_FAIL in the program's environment.
class AttachFailure : public ::testing::TestWithParam<std::string> {};

TEST_P(AttachFailure, LeavesTheProcessAsItWas) {
    ScratchDir dir;
    // Two more threads allocate every 10 ms while gdb works (and the GOT would be patched).
    Service service(dir, {"env", "GROWTRACE_TEST_ATTACH_FAIL=" + GetParam(), GT_PROGRAM_LONG_RUNNING, "30", "2"});
    ASSERT_TRUE(service.wait_for_lines(5)) << service.err();
    ProcessState before = state_of(service.pid());
    const std::string trace = dir / "failed.gtrace";
    ProcessResult r = growtrace({"attach", std::to_string(service.pid()), "--full", "-o", trace});
    EXPECT_EQ(r.exit_code, 2) << r.describe() << "\n" << r.err;
    EXPECT_NE(r.err.find("what attach loaded was unloaded and process " + std::to_string(service.pid()) +
                         " runs on as it was"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(trace));

    ASSERT_TRUE(service.alive()) << service.how_it_ended();
    ProcessState after = state_of(service.pid());
    for (const std::string& file : after.mapped_files)
        EXPECT_EQ(file.find("libgrowtrace"), std::string::npos) << "still mapped: " << file;
    EXPECT_EQ(after.mapped_files, before.mapped_files) << "before: " << describe(before) << "\nafter: " << describe(after);
    EXPECT_EQ(after.descriptors, before.descriptors) << "before: " << describe(before) << "\nafter: " << describe(after);
    EXPECT_EQ(after.threads, before.threads) << "before: " << describe(before) << "\nafter: " << describe(after);
    // Left mapped, unreferenced: glibc's cache of the stacks of the two ended tracer threads, the
    // writer and its file thread (a guard page and a stack each: 4 mappings, reused for the
    // program's next threads). The tracer's own tables (stack tree, event buffers, module
    // ranges, the writer's buffers) are unmapped.
    EXPECT_LE(after.anonymous_mappings, before.anonymous_mappings + 4)
        << "before: " << describe(before) << "\nafter: " << describe(after);

    // Runs on, its calls to malloc & co going where they did (a slot left pointing into the
    // unloaded library would crash it at its next allocation).
    size_t printed = service.lines().size();
    ASSERT_TRUE(service.wait_for_lines(printed + 5)) << service.how_it_ended();
    EXPECT_TRUE(service.alive()) << service.how_it_ended();
    service.stop();
    expect_ticks_in_order(service.lines(), std::regex(R"(tick (\d+) sessions \d+ check \d+)"));
    EXPECT_EQ(service.err(), "");
}

INSTANTIATE_TEST_SUITE_P(Steps, AttachFailure, ::testing::Values("begin", "patch"));

void expect_error(const ProcessResult& r, const std::string& text) {
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("growtrace: error: " + text), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(AttachErrors, NoSuchProcess) {
    expect_error(growtrace({"attach", "2147483646"}), "no such process: 2147483646");
    expect_error(growtrace({"detach", "2147483646"}), "no such process: 2147483646");
}

TEST(AttachErrors, AWaitBoundOutOfRangeIsRefusedBeforeGdbRuns) {
    ProcessResult r = growtrace({"attach", "2147483646", "--max-wait", "0"});
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_NE(r.err.find("growtrace: error: --max-wait: Value 0 not in range 1 to 3600"), std::string::npos) << r.err;
}

TEST(AttachErrors, StaticallyLinkedProgram) {
    ScratchDir dir;
    Service service(dir, {GT_PROGRAM_STATIC_SLEEPER, "20"});
    const std::string exe = "/proc/" + std::to_string(service.pid()) + "/exe";
    ASSERT_TRUE(eventually([&] {  // exec'd: the process is the static program now
        std::error_code ec;
        return fs::equivalent(exe, GT_PROGRAM_STATIC_SLEEPER, ec);
    }, 20s));
    ProcessResult r = growtrace({"attach", std::to_string(service.pid())});
    expect_error(r, "process " + std::to_string(service.pid()) + " runs a statically linked program");
    EXPECT_TRUE(service.alive()) << service.how_it_ended();
}

TEST(AttachErrors, ProcessAlreadyBeingTraced) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
        for (;;) pause();
    }
    // PTRACE_TRACEME done: the kernel names its tracer (this process) in the child's status.
    const std::string status = "/proc/" + std::to_string(child) + "/status";
    ASSERT_TRUE(eventually([&] { return read_file(status).find("TracerPid:\t" + std::to_string(getpid())) != std::string::npos; }, 20s));
    ProcessResult r = growtrace({"attach", std::to_string(child)});
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    expect_error(r, "process " + std::to_string(child) + " is already being traced by process " + std::to_string(getpid()));
}

TEST(AttachErrors, GdbMissing) {
    ScratchDir dir;
    Service service(dir, {GT_PROGRAM_LONG_RUNNING, "20"});
    ASSERT_TRUE(service.wait_for_lines(1));
    ProcessResult r = growtrace({"attach", std::to_string(service.pid())}, RunOptions{.env = {{"PATH", dir.path().string()}}});
    expect_error(r, "gdb is needed to attach but is not on PATH");
    EXPECT_TRUE(service.alive()) << service.how_it_ended();
}

TEST(AttachErrors, DetachWithoutAttach) {
    ScratchDir dir;
    Service service(dir, {GT_PROGRAM_LONG_RUNNING, "20"});
    ASSERT_TRUE(service.wait_for_lines(1));
    ProcessResult r = growtrace({"detach", std::to_string(service.pid())});
    expect_error(r, "growtrace was never attached to process " + std::to_string(service.pid()));
    ASSERT_TRUE(service.alive()) << service.how_it_ended();
    size_t printed = service.lines().size();
    EXPECT_TRUE(service.wait_for_lines(printed + 2));
}

}  // namespace
}  // namespace growtrace::e2e
