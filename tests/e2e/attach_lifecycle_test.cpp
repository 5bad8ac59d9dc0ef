// A process growtrace attached to is traced like one started under `growtrace run` through
// its whole life: it forks (each child writes its own complete trace), execs (the new image is
// traced), exits from a thread or by returning from main (the trace ends with the shutdown
// mark and the exit status is the program's) and closes a library whose code allocated (its
// frames keep their names). Each case mirrors a run-mode case of stress_test.cpp on
// test_programs/stress/stress.cpp, started as `gt_stress after GO MODE...`: it waits for the
// file GO, which the test creates once `growtrace attach --no-wait` has started the trace.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include "e2e_support.h"
#include "report_view.h"

namespace growtrace::e2e {
namespace {

struct AttachedRun {
    ProcessResult plain;     // the same mode untraced
    ProcessResult attached;  // the attached run's own output and status
    std::string trace;
    std::string attach_err;
};

struct AttachOptions {
    int timeout = 60;
    std::vector<std::string> plain_mode;  // what runs untraced, if not the same mode
    std::vector<std::pair<std::string, std::string>> env;  // of the attached program
};

// gt_stress MODE ARGS untraced, then again with `growtrace attach` while it waits to begin.
AttachedRun attach_to_stress(const ScratchDir& dir, const std::vector<std::string>& mode,
                             const AttachOptions& options = {}) {
    AttachedRun run;
    std::vector<std::string> plain{GT_STRESS};
    const std::vector<std::string>& plain_mode = options.plain_mode.empty() ? mode : options.plain_mode;
    plain.insert(plain.end(), plain_mode.begin(), plain_mode.end());
    run.plain = run_process(plain, {.timeout_seconds = options.timeout});

    const std::string go = dir / "go";
    std::vector<std::string> argv{GT_STRESS, "after", go};
    argv.insert(argv.end(), mode.begin(), mode.end());
    Spawned program(argv, {.cwd = dir.path().string(), .env = options.env, .timeout_seconds = options.timeout});
    run.trace = dir / (mode[0] + ".gtrace");
    // --full: every allocation, to assert exact counts (attach samples by default).
    ProcessResult attach = growtrace({"attach", std::to_string(program.pid()), "--full", "-o", run.trace, "--no-wait"});
    run.attach_err = attach.err;
    write_file(go, "");
    run.attached = program.wait();
    EXPECT_EQ(attach.exit_code, 0) << attach.describe() << "\n" << attach.err;
    return run;
}

// The attached run printed and ended as the untraced one.
void expect_same_behaviour(const AttachedRun& run) {
    ASSERT_FALSE(run.plain.timed_out) << "the program hangs even without the tracer";
    EXPECT_FALSE(run.attached.timed_out) << run.attached.err;
    EXPECT_EQ(run.attached.out, run.plain.out) << run.attached.err;
    EXPECT_EQ(run.attached.exit_code, run.plain.exit_code) << run.attached.err;
    EXPECT_EQ(run.attached.signal, run.plain.signal) << run.attached.err;
    EXPECT_EQ(run.attached.err, run.plain.err);
}

std::vector<std::string> traces_in(const ScratchDir& dir) {
    std::vector<std::string> traces;
    for (const std::string& name : dir.files())
        if (name.ends_with(".gtrace")) traces.push_back(dir / name);
    return traces;
}

bool has_shutdown_mark(const std::string& trace) {
    return growtrace({"dump", trace}).out.find("Exiting ticks=") != std::string::npos;
}

TEST(AttachLifecycle, ForkedChildrenWriteCompleteTracesAsUnderRun) {
    ScratchDir dir;
    AttachedRun run = attach_to_stress(dir, {"fork", "5"});
    expect_same_behaviour(run);
    EXPECT_EQ(run.attached.out, "fork: 5 children, 0 failed\n");
    std::vector<std::string> traces = traces_in(dir);
    EXPECT_EQ(traces.size(), 6u) << fmt::format("{}", fmt::join(traces, " "));
    for (const std::string& t : traces) {
        if (t == run.trace) continue;
        SCOPED_TRACE(t);
        nlohmann::json json = analyze_json(dir, t);
        EXPECT_TRUE(json.value("ended_cleanly", false));
        Report child(json);
        auto site = child.stack_in("child_keep");
        ASSERT_TRUE(site) << child.summary();
        EXPECT_EQ(site->allocations, 50u);
        EXPECT_EQ(site->live_count, 50u);
        EXPECT_EQ(site->live_bytes, 50u * 2000u);
    }
    nlohmann::json parent = analyze_json(dir, run.trace);
    EXPECT_TRUE(parent.value("ended_cleanly", false));
    int forks = 0;
    for (const auto& child : parent["children"]) forks += child.value("kind", "") == "fork";
    EXPECT_EQ(forks, 5) << parent["children"].dump();
    EXPECT_FALSE(Report(parent).stack_in("child_keep")) << "children's allocations in the parent's trace";
}

TEST(AttachLifecycle, AnExecdImageIsTracedAsUnderRun) {
    ScratchDir dir;
    AttachedRun run = attach_to_stress(dir, {"fork-exec", GT_STRESS});
    expect_same_behaviour(run);
    EXPECT_EQ(run.attached.out, "exec-child: kept 100 blocks\nfork-exec: child ended with 0\n");
    // The attached process, its forked child (until its exec) and the exec'd image.
    std::vector<std::string> traces = traces_in(dir);
    EXPECT_EQ(traces.size(), 3u) << fmt::format("{}", fmt::join(traces, " "));
    int found = 0, execs = 0;
    for (const std::string& t : traces) {
        nlohmann::json json = analyze_json(dir, t);
        int image_execs = 0;
        for (const auto& child : json["children"]) image_execs += child.value("kind", "") == "exec";
        // A trace ends with its End record but the forked child's, which ends with its exec.
        EXPECT_EQ(json.value("ended_cleanly", false), image_execs == 0) << t;
        execs += image_execs;
        if (auto site = Report(json).stack_in("exec_child_keep")) {
            ++found;
            EXPECT_EQ(site->live_count, 100u);
            EXPECT_EQ(site->live_bytes, 100u * 1000u);
        }
    }
    EXPECT_EQ(found, 1) << fmt::format("{}", fmt::join(traces, " "));
    EXPECT_EQ(execs, 1) << "the forked child's trace does not record its exec";
}

TEST(AttachLifecycle, ExitFromAThreadEndsTheTraceWithTheShutdownMark) {
    ScratchDir dir;
    AttachedRun run = attach_to_stress(dir, {"exit-thread"}, {.timeout = 20});
    expect_same_behaviour(run);
    EXPECT_EQ(run.attached.exit_code, 7);
    nlohmann::json json = analyze_json(dir, run.trace);
    EXPECT_TRUE(json.value("ended_cleanly", false));
    EXPECT_TRUE(has_shutdown_mark(run.trace)) << "no shutdown mark";
}

TEST(AttachLifecycle, ReturningFromMainEndsTheTraceWithTheShutdownMark) {
    ScratchDir dir;
    AttachedRun run = attach_to_stress(dir, {"memalign"});
    expect_same_behaviour(run);
    EXPECT_EQ(run.attached.exit_code, 0);
    nlohmann::json json = analyze_json(dir, run.trace);
    EXPECT_TRUE(json.value("ended_cleanly", false));
    EXPECT_TRUE(has_shutdown_mark(run.trace)) << "no shutdown mark";
    // Alignments 2^4 .. 2^21, sizes 10000 + log2(alignment), as under run.
    auto site = Report(json).stack_in("aligned_keep");
    ASSERT_TRUE(site) << Report(json).summary();
    EXPECT_EQ(site->live_count, 18u);
    EXPECT_EQ(site->live_bytes, 18u * 10000u + (4u + 21u) * 18u / 2u);
}

// The library is loaded after the attach and closed as soon as its calls reach the tracer
// (patched by the attach's rescan), with the writer's tick (when it scans the loaded objects)
// longer than the program's run: only the dlclose hook can write the library's address range
// down before it is gone.
TEST(AttachLifecycle, FramesOfALibraryClosedWhileAttachedStillSymbolize) {
    ScratchDir dir;
    AttachedRun run = attach_to_stress(dir, {"dlclose-patched", GT_STRESS_PLUGIN},
                                       {.plain_mode = {"dlclose", GT_STRESS_PLUGIN}, .env = {{"GROWTRACE_TICK_MS", "20000"}}});
    expect_same_behaviour(run);
    EXPECT_EQ(run.attached.out, "dlclose: 100 blocks kept from the closed library\n");
    Report report(analyze_json(dir, run.trace));
    auto site = report.stack_at("stress_plugin_keep", "stress_plugin.cpp", -1);
    ASSERT_TRUE(site) << report.summary();
    EXPECT_EQ(site->module_basename, "libgt_stress_plugin.so");
    EXPECT_EQ(site->live_count, 100u);
    EXPECT_EQ(site->live_bytes, 100u * 1000u);
}

}  // namespace
}  // namespace growtrace::e2e
