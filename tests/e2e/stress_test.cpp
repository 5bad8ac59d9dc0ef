// The tracer never harms the traced program: test_programs/stress/stress.cpp run
// with and without the tracer must print the same and exit the same, the accounting is exact
// where the program's behaviour is, and faults of the tracer itself (full disk, removed trace,
// read-only directory, no descriptors left) stop the tracer cleanly with one `growtrace:` line
// while the program runs on. Each case is sized for 2 cores: a few seconds at most.
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "e2e_support.h"
#include "format/trace_format.h"
#include "report_view.h"

namespace growtrace::e2e {
namespace {

std::vector<std::string> stress_args(const std::vector<std::string>& args) {
    std::vector<std::string> argv{GT_STRESS};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

ProcessResult untraced(const std::vector<std::string>& args, int timeout = 60) {
    return run_process(stress_args(args), {.timeout_seconds = timeout});
}

// `growtrace run -o TRACE -- gt_stress ARGS...`
ProcessResult traced(const ScratchDir& dir, const std::string& trace, const std::vector<std::string>& args,
                     int timeout = 60, bool keep_helper_traces = false) {
    std::vector<std::string> run{"run", "-o", trace, "--"};
    if (keep_helper_traces) run.insert(run.begin() + 1, "--keep-helper-traces");
    auto argv = stress_args(args);
    run.insert(run.end(), argv.begin(), argv.end());
    return growtrace(run, {.cwd = dir.path().string(), .timeout_seconds = timeout});
}

// gt_stress ARGS with the library preloaded directly (no `growtrace run` to check the output
// path first), tracing to `output`.
ProcessResult preloaded(const std::string& output, const std::vector<std::string>& args, int timeout = 60) {
    return run_process(stress_args(args),
                       {.env = {{"LD_PRELOAD", GT_PRELOAD_LIBRARY}, {"GROWTRACE_OUTPUT", output}},
                        .timeout_seconds = timeout});
}

// The traced run printed and ended exactly as the untraced one (`growtrace run` exits 128+N
// for a program killed by signal N).
void expect_same_behaviour(const ProcessResult& plain, const ProcessResult& with_tracer, bool through_run) {
    ASSERT_FALSE(plain.timed_out) << "the program hangs even without the tracer";
    EXPECT_FALSE(with_tracer.timed_out) << "the traced program hung\n" << with_tracer.err;
    EXPECT_EQ(with_tracer.out, plain.out) << with_tracer.err;
    if (through_run && plain.signal != 0) {
        EXPECT_EQ(with_tracer.signal, 0);
        EXPECT_EQ(with_tracer.exit_code, 128 + plain.signal) << with_tracer.err;
    } else {
        EXPECT_EQ(with_tracer.signal, plain.signal) << with_tracer.err;
        EXPECT_EQ(with_tracer.exit_code, plain.exit_code) << with_tracer.err;
    }
}

// gt_stress `args`, untraced and traced (to a trace named after the mode): the same behaviour,
// and (when given) this stdout. Returns the traced run's analysis.
Report same_both_ways(const ScratchDir& dir, const std::vector<std::string>& args, const char* out = nullptr) {
    std::string trace = dir / (args[0] + ".gtrace");
    ProcessResult plain = untraced(args);
    ProcessResult r = traced(dir, trace, args);
    expect_same_behaviour(plain, r, true);
    if (out) {
        EXPECT_EQ(r.out, out);
    }
    return Report(analyze_json(dir, trace));
}

// The exact figures of the stacks through `function`.
void expect_site(const Report& report, const std::string& function, uint64_t allocations, uint64_t live_count,
                 uint64_t live_bytes) {
    auto site = report.stack_in(function);
    ASSERT_TRUE(site) << function << ": " << report.summary();
    EXPECT_EQ(site->allocations, allocations) << function;
    EXPECT_EQ(site->live_count, live_count) << function;
    EXPECT_EQ(site->live_bytes, live_bytes) << function;
}

std::vector<std::string> tracer_lines(const std::string& err) {
    std::vector<std::string> lines;
    size_t begin = 0;
    while (begin < err.size()) {
        size_t end = err.find('\n', begin);
        if (end == std::string::npos) end = err.size();
        std::string line = err.substr(begin, end - begin);
        if (line.starts_with("growtrace: ")) lines.push_back(line);
        begin = end + 1;
    }
    return lines;
}

std::vector<std::string> traces_in(const ScratchDir& dir) {
    std::vector<std::string> traces;
    for (const std::string& name : dir.files())
        if (name.ends_with(".gtrace")) traces.push_back(dir / name);
    return traces;
}

std::vector<std::string> warnings_of(const nlohmann::json& report) {
    std::vector<std::string> warnings;
    if (auto it = report.find("warnings"); it != report.end() && it->is_array())
        for (const auto& w : *it)
            if (w.is_string()) warnings.push_back(w.get<std::string>());
    return warnings;
}

// A tmpfs mounted for one test, detached when done.
class TmpfsMount {
public:
    TmpfsMount(const std::string& path, const char* options, unsigned long flags = 0) : path_(path) {
        mkdir(path.c_str(), 0755);
        if (mount("tmpfs", path.c_str(), "tmpfs", flags, options) == 0) mounted_ = true;
        else error_ = strerror(errno);
    }
    ~TmpfsMount() {
        if (mounted_) umount2(path_.c_str(), MNT_DETACH);
    }
    bool mounted() const { return mounted_; }
    const std::string& error() const { return error_; }

private:
    std::string path_;
    bool mounted_ = false;
    std::string error_;
};

// --- the program's behaviour ---

TEST(Stress, ManyShortLivedThreads) {
    ScratchDir dir;
    Report report = same_both_ways(dir, {"threads", "20", "8"}, "threads: 160 threads kept one block each\n");
    expect_site(report, "thread_keep", 160, 160, 160u * 1000u);
}

// gt_stress MODE CHILDREN untraced and traced to `trace`: the same behaviour, every child
// ended well, and one trace for the parent and each child. The traces' paths.
std::vector<std::string> forks_both_ways(const ScratchDir& dir, const std::string& trace, const std::string& mode,
                                         size_t children, int timeout) {
    const std::vector<std::string> args{mode, std::to_string(children)};
    ProcessResult plain = untraced(args, timeout);
    ProcessResult r = traced(dir, trace, args, 2 * timeout);
    expect_same_behaviour(plain, r, true);
    EXPECT_EQ(r.out, fmt::format("{}: {} children, 0 failed\n", mode, children));
    std::vector<std::string> traces = traces_in(dir);
    EXPECT_EQ(traces.size(), children + 1) << fmt::format("{}", fmt::join(traces, " "));
    return traces;
}

TEST(Stress, ForkWhileOtherThreadsAllocate) {
    ScratchDir dir;
    std::string trace = dir / "fork.gtrace";
    // The parent's trace and one per child; every child's shows its own 50 blocks, all freed.
    std::vector<std::string> traces = forks_both_ways(dir, trace, "fork", 20, 30);
    for (const std::string& t : traces) {
        if (t == trace) continue;
        SCOPED_TRACE(t);
        Report child(analyze_json(dir, t));
        auto site = child.stack_in("child_keep");
        ASSERT_TRUE(site) << child.summary();
        EXPECT_EQ(site->allocations, 50u);
        EXPECT_EQ(site->live_count, 50u);
        EXPECT_EQ(site->live_bytes, 50u * 2000u);
    }
    Report parent(analyze_json(dir, trace));
    EXPECT_FALSE(parent.stack_in("child_keep")) << "children's allocations in the parent's trace";
}

// A thread inside the unwinder at a fork holds its locks in the child for ever (libunwind's
// cache lock; the first capture there waited for it): threads whose captures keep missing
// the unwinder's caches make that likely at every fork.
TEST(Stress, ForkWhileOtherThreadsUnwindUncachedStacks) {
    ScratchDir dir;
    forks_both_ways(dir, dir / "cold.gtrace", "fork-cold", 100, 120);
}

TEST(Stress, ExecFromForkedChild) {
    ScratchDir dir;
    std::string trace = dir / "fe.gtrace";
    ProcessResult plain = untraced({"fork-exec", GT_STRESS}, 30);
    // Every trace kept: the forked child and its exec'd image allocate little (exec_chain_test.cpp).
    ProcessResult r = traced(dir, trace, {"fork-exec", GT_STRESS}, 30, true);
    expect_same_behaviour(plain, r, true);
    EXPECT_EQ(r.out, "exec-child: kept 100 blocks\nfork-exec: child ended with 0\n");
    // Parent, forked child (until its exec) and the exec'd image: the image's trace has the blocks.
    std::vector<std::string> traces = traces_in(dir);
    EXPECT_EQ(traces.size(), 3u) << fmt::format("{}", fmt::join(traces, " "));
    int found = 0, execs = 0;
    for (const std::string& t : traces) {
        nlohmann::json json = analyze_json(dir, t);
        // The forked child's trace ends with its exec (flushed before it, even through execl).
        if (json.contains("children") && json["children"].is_array())
            for (const auto& child : json["children"])
                if (child.value("kind", "") == "exec") ++execs;
        Report report(json);
        if (auto site = report.stack_in("exec_child_keep")) {
            ++found;
            EXPECT_EQ(site->live_count, 100u);
            EXPECT_EQ(site->live_bytes, 100u * 1000u);
        }
    }
    EXPECT_EQ(found, 1) << fmt::format("{}", fmt::join(traces, " "));
    EXPECT_EQ(execs, 1) << "the forked child's trace does not record its exec";
}

TEST(Stress, AllocationInSignalHandler) {
    ScratchDir dir;
    ProcessResult plain = untraced({"signal", "1500"}, 20);
    if (plain.timed_out) GTEST_SKIP() << "the program deadlocks without the tracer on this C library";
    ProcessResult r = traced(dir, dir / "signal.gtrace", {"signal", "1500"}, 20);
    expect_same_behaviour(plain, r, true);
    EXPECT_EQ(r.out, "signal: handler ran at least once\n");
    Report report(analyze_json(dir, dir / "signal.gtrace"));
    EXPECT_GT(report.total("allocations"), 1000u);
}

TEST(Stress, ReallocChainIsExact) {
    ScratchDir dir;
    Report report = same_both_ways(dir, {"realloc", "1000"});
    // realloc(NULL) first, then 999 moves, grows and shrinks
    expect_site(report, "realloc_chain", 1000, 1, 150000);
}

// A realloc or reallocarray that fails leaves its block as it was, and so does the trace: each
// block is alive at the end with its size and the stack that made it.
TEST(Stress, FailedReallocLeavesTheBlockAsItWas) {
    ScratchDir dir;
    Report report =
        same_both_ways(dir, {"failed-realloc", "200"}, "failed-realloc: 200 of 200 failed, 200 blocks whole\n");
    expect_site(report, "failed_realloc_keep", 200, 200, 200u * 40000u);
    // Nothing recorded again at the failed calls' stacks (which pass through this one too).
    EXPECT_EQ(report.live_bytes_in("mode_failed_realloc"), 200u * 40000u) << report.summary();
}

// Sampled mode takes the threads' current buffers once a second, but buffers that fill up are
// handed over at once: with a sample point per byte every block is a sample (weight 1), and five
// million blocks allocated and freed fill buffers far faster than once a second. The writer then
// collects early (an eighth of the pool waiting), so every allocation and free is in the trace,
// in order, and the tracer never has to merge without a thread (its TracerError warning).
TEST(Stress, SampledBuffersThatFillUpAreWrittenWithoutLoss) {
    ScratchDir dir;
    std::string trace = dir / "live.gtrace";
    const std::vector<std::string> args{"live", "5000000", "0"};
    ProcessResult plain = untraced(args, 120);
    std::vector<std::string> run{"run", "--sample", "1", "-o", trace, "--"};
    for (const std::string& a : stress_args(args)) run.push_back(a);
    ProcessResult r = growtrace(run, {.cwd = dir.path().string(), .timeout_seconds = 240});
    expect_same_behaviour(plain, r, true);
    nlohmann::json json = analyze_json(dir, trace);
    EXPECT_EQ(json["sampling"]["mean_bytes"], 1);
    EXPECT_TRUE(warnings_of(json).empty()) << json["warnings"].dump();
    EXPECT_TRUE(json["ledger"].value("balanced", false)) << json["ledger"].dump();
    Report report(json);
    auto site = report.stack_in("live_keep");
    ASSERT_TRUE(site) << report.summary();
    EXPECT_EQ(site->allocations, 5000000u);
    EXPECT_EQ(site->live_count, 0u) << "every free matched its allocation";
    EXPECT_EQ(json["totals"]["unmatched_frees"], 0);
    // A sampled trace is format::kSampledVersion (5 or later): its first compressed block stands
    // alone and every later one refers back into the block before (ZstdWithPrefix); the counts
    // above show that each of them decoded whole. How many blocks there are depends on how the
    // writer's cycles fall, so only the codecs are asserted.
    std::ifstream in(trace, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(bytes.size(), sizeof(format::FileHeader));
    format::FileHeader header;
    std::memcpy(&header, bytes.data(), sizeof header);
    EXPECT_EQ(header.version, format::kSampledVersion);
    std::map<int, int> codecs;
    for (size_t at = sizeof header; at + sizeof(format::BlockHeader) <= bytes.size();) {
        format::BlockHeader block;
        std::memcpy(&block, bytes.data() + at, sizeof block);
        ++codecs[block.codec];
        at += sizeof block + block.stored_size;
    }
    EXPECT_EQ(codecs[static_cast<int>(format::Codec::Zstd)], 1) << fmt::format("{}", codecs);
    EXPECT_GE(codecs[static_cast<int>(format::Codec::ZstdWithPrefix)], 1) << fmt::format("{}", codecs);
}

TEST(Stress, PosixMemalignLargeAlignmentsAreExact) {
    ScratchDir dir;
    Report report = same_both_ways(dir, {"memalign"}, "memalign: 18 aligned blocks kept, alignment 24 gives EINVAL\n");
    // Alignments 2^4 .. 2^21, sizes 10000 + log2(alignment): the requested sizes, not padding.
    expect_site(report, "aligned_keep", 18, 18, 18u * 10000u + (4u + 21u) * 18u / 2u);
}

TEST(Stress, ExitFromThreadWhileOthersAllocate) {
    ScratchDir dir;
    std::string trace = dir / "exit.gtrace";
    for (int attempt = 0; attempt < 3; ++attempt) {  // exit races with allocating threads: repeat
        SCOPED_TRACE(attempt);
        ProcessResult plain = untraced({"exit-thread"}, 20);
        ProcessResult r = traced(dir, trace, {"exit-thread"}, 20);
        expect_same_behaviour(plain, r, true);
        EXPECT_EQ(r.exit_code, 7);
        ProcessResult analysis = growtrace({"analyze", trace, "--json", "-o", trace + ".json"});
        EXPECT_EQ(analysis.exit_code, 0) << analysis.err;
        if (HasFailure()) break;
    }
}

TEST(Stress, KilledProgramIsAnalysedUpToItsLastFlush) {
    ScratchDir dir;
    std::string trace = dir / "kill.gtrace";
    ProcessResult plain = untraced({"kill"});
    ASSERT_EQ(plain.signal, SIGKILL);
    ProcessResult r = traced(dir, trace, {"kill"});
    expect_same_behaviour(plain, r, true);
    ASSERT_TRUE(fs::exists(trace)) << r.err;

    ProcessResult analysis = growtrace({"analyze", trace, "--json", "-o", trace + ".json"});
    ASSERT_EQ(analysis.exit_code, 0) << analysis.err;
    auto report = nlohmann::json::parse(read_file(trace + ".json"));
    EXPECT_EQ(report.value("ended_cleanly", true), false);
    auto warnings = warnings_of(report);
    EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(),
                            [](const std::string& w) { return w.find("no end record") != std::string::npos; }))
        << report.dump(1);
    Report view(report);
    auto site = view.stack_in("keep_before_kill");
    ASSERT_TRUE(site) << view.summary();
    EXPECT_EQ(site->live_count, 100u);
    EXPECT_EQ(site->live_bytes, 100u * 1000u);
    EXPECT_EQ(growtrace({"dump", trace}).exit_code, 0);
}

TEST(Stress, FramesOfClosedLibraryStillSymbolize) {
    ScratchDir dir;
    std::string trace = dir / "dlclose.gtrace";
    ProcessResult plain = untraced({"dlclose", GT_STRESS_PLUGIN});
    ProcessResult r = traced(dir, trace, {"dlclose", GT_STRESS_PLUGIN});
    expect_same_behaviour(plain, r, true);
    EXPECT_EQ(r.out, "dlclose: 100 blocks kept from the closed library\n");
    Report report(analyze_json(dir, trace));
    // Any line: malloc is a tail call there, so the frame's line depends on the compiler.
    auto site = report.stack_at("stress_plugin_keep", "stress_plugin.cpp", -1);
    ASSERT_TRUE(site) << report.summary();
    EXPECT_EQ(site->module_basename, "libgt_stress_plugin.so");
    EXPECT_EQ(site->live_count, 100u);
    EXPECT_EQ(site->live_bytes, 100u * 1000u);
}

// --- the tracer's threads never keep the process alive ---

TEST(Stress, MainThreadEndsWithPthreadExit) {
    ScratchDir dir;
    std::string trace = dir / "pexit.gtrace";
    ProcessResult plain = untraced({"pthread-exit"}, 20);
    ProcessResult r = traced(dir, trace, {"pthread-exit"}, 20);
    expect_same_behaviour(plain, r, true);
    // glibc's exit(0) after the last thread: the handler ran and stdio was flushed.
    EXPECT_EQ(r.out, "pthread-exit: main thread leaves\npthread-exit: worker done\npthread-exit: exit handlers ran\n");
    EXPECT_EQ(r.exit_code, 0);
    nlohmann::json json = analyze_json(dir, trace);
    EXPECT_TRUE(json.value("ended_cleanly", false)) << json.dump(1);
    Report report(json);
    auto site = report.stack_in("worker_keep");
    ASSERT_TRUE(site) << report.summary();
    EXPECT_EQ(site->live_count, 100u);
    EXPECT_EQ(site->live_bytes, 100u * 1000u);
}

TEST(Stress, ChildForkedFromAThreadEndsWhenThatThreadReturns) {
    ScratchDir dir;
    std::string trace = dir / "fft.gtrace";
    ProcessResult plain = untraced({"fork-from-thread"}, 30);
    ProcessResult r = traced(dir, trace, {"fork-from-thread"}, 30);
    expect_same_behaviour(plain, r, true);
    EXPECT_EQ(r.out, "fork-from-thread: child done\nfork-from-thread: child ended with 0\n");
    std::vector<std::string> traces = traces_in(dir);
    ASSERT_EQ(traces.size(), 2u) << fmt::format("{}", fmt::join(traces, " "));
    for (const std::string& t : traces) {
        if (t == trace) continue;
        nlohmann::json json = analyze_json(dir, t);
        EXPECT_TRUE(json.value("ended_cleanly", false)) << json.dump(1);
        EXPECT_TRUE(warnings_of(json).empty()) << json.dump(1);  // the program still named after its main thread ended
        Report child(json);
        auto site = child.stack_in("child_keep");
        ASSERT_TRUE(site) << child.summary();
        EXPECT_EQ(site->live_count, 50u);
    }
}

// The last thread's exit handler waits for ever: a SIGTERM must still end the process, as it
// does untraced (the tracer's thread runs the exit with the program's signal mask).
TEST(Stress, SignalEndsAProcessWhoseLastThreadHangsInExit) {
    ScratchDir dir;
    auto run_and_terminate = [&](const std::vector<std::string>& argv) {
        Spawned process(argv, {.cwd = dir.path().string(), .timeout_seconds = 20});
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // worker done, handler waiting
        kill(process.pid(), SIGTERM);
        return process.wait();
    };
    ProcessResult plain = run_and_terminate(stress_args({"pthread-exit-hang"}));
    ASSERT_EQ(plain.signal, SIGTERM) << plain.describe();
    std::vector<std::string> run{GT_GROWTRACE, "run", "-o", dir / "hang.gtrace", "--"};
    for (const std::string& a : stress_args({"pthread-exit-hang"})) run.push_back(a);
    ProcessResult r = run_and_terminate(run);
    expect_same_behaviour(plain, r, true);
    EXPECT_EQ(r.out, "pthread-exit: main thread leaves\npthread-exit: worker done\npthread-exit: exit handler waits\n");
}

// --- the tracer's descriptors stay out of the program's sight ---

TEST(Stress, ProgramSeesTheSameDescriptorsTraced) {
    ScratchDir dir;
    ProcessResult plain = untraced({"fd-status"});
    ProcessResult r = traced(dir, dir / "fds.gtrace", {"fd-status"});
    expect_same_behaviour(plain, r, true);
    // A child given some descriptors (subprocess's pass_fds) sees exactly those, though it is
    // traced too (an exec'd image has its own trace and descriptors).
    ProcessResult plain_pass = untraced({"pass-fds", GT_STRESS});
    ProcessResult pass = traced(dir, dir / "pass.gtrace", {"pass-fds", GT_STRESS}, 60, true);  // every trace kept
    expect_same_behaviour(plain_pass, pass, true);
    for (const std::string& line : tracer_lines(pass.err))  // `growtrace run`'s notes only
        EXPECT_NE(line.find(" written to "), std::string::npos) << pass.err;
    EXPECT_EQ(traces_in(dir).size(), 4u);
    for (const std::string& t : traces_in(dir)) {
        if (t == dir / "fds.gtrace") continue;
        SCOPED_TRACE(t);
        nlohmann::json json = analyze_json(dir, t);  // the forked child wrote its trace though it closed every descriptor
        EXPECT_NE(json.value("pid", 0), 0) << json.dump(1);
        EXPECT_NE(json.value("command", ""), "") << json.dump(1);
        if (!json.value("ended_cleanly", false)) {  // the forked child, which exec'd at once
            EXPECT_EQ(warnings_of(json), std::vector<std::string>{
                                             "trace ends where the process exec'd another program (traced to a file of its own)"});
        }
    }
}

// Not even for the moment an open lasts: with a block written every 10 ms, a thread that looks
// at every number over and over finds none of the tracer's (its file work has a descriptor
// table of its own, preload/support/file_thread.h).
TEST(Stress, ATracerDescriptorIsNeverInTheProgramsTableEvenForAMoment) {
    ScratchDir dir;
    ProcessResult plain = untraced({"fd-watch", "1500"});
    ProcessResult r = growtrace({"run", "-o", dir / "watch.gtrace", "--", GT_STRESS, "fd-watch", "1500"},
                                {.cwd = dir.path().string(), .env = {{"GROWTRACE_TICK_MS", "10"}}});
    expect_same_behaviour(plain, r, true);
    EXPECT_EQ(r.out, "fd-watch: no descriptor but its own\n");
    EXPECT_TRUE(analyze_json(dir, dir / "watch.gtrace").value("ended_cleanly", false));
}

// The tracer's own frames never show in a stack: not its hooks, and not the function through
// which it runs the program's main (to mark the start of exit).
TEST(Stress, TracerFramesNeverShowInStacks) {
    ScratchDir dir;
    std::string trace = dir / "frames.gtrace";
    ProcessResult r = traced(dir, trace, {"threads", "4", "4"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json json = analyze_json(dir, trace);
    size_t frames = 0;
    for (const char* list : {"findings", "groups"})
        for (const auto& group : json[list])
            for (const auto& frame : group["frames"]) {
                ++frames;
                EXPECT_NE(frame.value("module", ""), "libgrowtrace.so") << frame.dump();
                EXPECT_NE(frame.value("function", ""), "main_then_exiting") << frame.dump();
            }
    EXPECT_GT(frames, 0u);
}

// --- faults of the tracer itself ---

// What was written must be readable: exit 0, or 2 with one clear error line.
void expect_readable_or_clear_error(const std::string& trace) {
    for (const char* verb : {"analyze", "dump"}) {
        SCOPED_TRACE(verb);
        ProcessResult r = growtrace({verb, trace});
        EXPECT_EQ(r.signal, 0) << r.err;
        EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2) << r.describe() << "\n" << r.err;
        if (r.exit_code == 2) {
            EXPECT_TRUE(r.err.starts_with("growtrace: error: ")) << r.err;
        }
    }
}

TEST(TracerFaults, DiskFillsUp) {
    ScratchDir dir;
    std::string mount_point = dir / "small";
    TmpfsMount small(mount_point, "size=512k");
    if (!small.mounted()) GTEST_SKIP() << "cannot mount a 512 KiB tmpfs: " << small.error();
    std::string trace = mount_point + "/full.gtrace";
    ProcessResult plain = untraced({"churn", "3000000"});
    ProcessResult r = preloaded(trace, {"churn", "3000000"});
    expect_same_behaviour(plain, r, false);
    auto lines = tracer_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find("No space left on device"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("tracing stopped"), std::string::npos) << lines[0];
    // Whole blocks only: the analyzer reads everything before the block that did not fit.
    ProcessResult analysis = growtrace({"analyze", trace});
    EXPECT_EQ(analysis.exit_code, 0) << analysis.err;
    expect_readable_or_clear_error(trace);
}

TEST(TracerFaults, TraceRemovedDuringTheRun) {
    ScratchDir dir;
    std::string trace = dir / "removed.gtrace";
    ProcessResult plain = untraced({"churn", "6000000"});
    Spawned process(stress_args({"churn", "6000000"}),
                    {.env = {{"LD_PRELOAD", GT_PRELOAD_LIBRARY}, {"GROWTRACE_OUTPUT", trace}}, .timeout_seconds = 60});
    for (int i = 0; i < 200 && !fs::exists(trace); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE(fs::remove(trace));
    ProcessResult r = process.wait();
    expect_same_behaviour(plain, r, false);
    auto lines = tracer_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find("was removed"), std::string::npos) << lines[0];
    EXPECT_FALSE(fs::exists(trace));
}

TEST(TracerFaults, ReadOnlyOutputDirectory) {
    ScratchDir dir;
    std::string mount_point = dir / "ro";
    TmpfsMount read_only(mount_point, "size=64k", MS_RDONLY);
    if (!read_only.mounted()) GTEST_SKIP() << "cannot mount a read-only tmpfs: " << read_only.error();
    std::string trace = mount_point + "/ro.gtrace";
    ProcessResult plain = untraced({"realloc", "100"});
    ProcessResult r = preloaded(trace, {"realloc", "100"});
    expect_same_behaviour(plain, r, false);
    auto lines = tracer_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find("Read-only file system"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("untraced"), std::string::npos) << lines[0];

    // Through `growtrace run`: it notices first, says so, and runs the command untraced.
    ProcessResult run = traced(dir, trace, {"realloc", "100"});
    expect_same_behaviour(plain, run, true);
    EXPECT_NE(run.err.find("Read-only file system"), std::string::npos) << run.err;
}

TEST(TracerFaults, ProgramUsesEveryDescriptor) {
    ScratchDir dir;
    std::string trace = dir / "fds.gtrace";
    ProcessResult plain = untraced({"fds", "3"});
    ProcessResult r = preloaded(trace, {"fds", "3"});
    expect_same_behaviour(plain, r, false);
    EXPECT_EQ(r.out, "fds: ran out of descriptors, 3 children, 0 failed\n");
    // The tracer had its trace open before the program took the rest; a forked child closes
    // the parent's trace first, so that descriptor is free for its own.
    EXPECT_TRUE(tracer_lines(r.err).empty()) << r.err;
    auto traces = traces_in(dir);
    EXPECT_EQ(traces.size(), 4u) << fmt::format("{}", fmt::join(traces, " "));
    for (const std::string& t : traces) {
        SCOPED_TRACE(t);
        Report report(analyze_json(dir, t));
        if (t == trace) {
            EXPECT_GE(report.total("allocations"), 10000u);
        } else {
            auto site = report.stack_in("child_keep");
            ASSERT_TRUE(site) << report.summary();
            EXPECT_EQ(site->allocations, 50u);
            EXPECT_EQ(site->live_bytes, 50u * 2000u);
        }
    }
}

TEST(TracerFaults, NoDescriptorLeftForTheTracer) {
    ScratchDir dir;
    std::string trace = dir / "nofd.gtrace";
    // Without the tracer the program runs with every descriptor taken by the hog library.
    ProcessResult plain = run_process(stress_args({"realloc", "100"}), {.env = {{"LD_PRELOAD", GT_STRESS_FDHOG}}});
    ProcessResult r = run_process(stress_args({"realloc", "100"}),
                                  // Preloaded objects initialise last to first: the hog runs first.
                                  {.env = {{"LD_PRELOAD", std::string(GT_PRELOAD_LIBRARY) + ":" + GT_STRESS_FDHOG},
                                           {"GROWTRACE_OUTPUT", trace}}});
    expect_same_behaviour(plain, r, false);
    EXPECT_EQ(r.out, "realloc: 100 steps, 0 lost contents\n");
    auto lines = tracer_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find("Too many open files"), std::string::npos) << lines[0];
    EXPECT_TRUE(lines[0].find("untraced") != std::string::npos || lines[0].find("tracing disabled") != std::string::npos)
        << lines[0];
    EXPECT_FALSE(fs::exists(trace));
}

}  // namespace
}  // namespace growtrace::e2e
