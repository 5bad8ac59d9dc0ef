// Each test program traced and analyzed: exact figures where the program determines them,
// and flagged / not flagged as the program's design says. The classification tests run in both
// modes: full, with exact figures, and sampled (--sample 512K), where each program
// is made bigger (larger blocks, same counts) so that its groups hold enough samples, the
// verdicts must be the same, and the figures must be within their reported uncertainty.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include "e2e_support.h"
#include "report_view.h"

namespace growtrace::e2e {
namespace {

// tools/analyze_command.h: the status of `analyze --fail-on-growth` when there is a finding.
constexpr int kExitGrowthFound = 3;

class Programs : public ::testing::TestWithParam<TraceMode> {
protected:
    bool sampled() const { return GetParam() == TraceMode::Sampled; }
    // The program's arguments in this mode: `extra` is appended for the sampled run.
    std::vector<std::string> args(std::vector<std::string> base, const std::vector<std::string>& extra) const {
        if (sampled()) base.insert(base.end(), extra.begin(), extra.end());
        return base;
    }
    ProcessResult trace(const ScratchDir& dir, const std::string& trace, const std::vector<std::string>& program) const {
        return trace_program(dir, trace, program, 0, mode_options(GetParam()));
    }
    // Full: exactly `truth`. Sampled: an estimate from enough samples, within 4.5 of its
    // standard errors of the truth (a failure once in 150,000 runs).
    void expect_bytes(const StackView& site, double truth) const {
        if (!sampled()) {
            EXPECT_EQ(site.live_bytes, static_cast<uint64_t>(truth));
            return;
        }
        EXPECT_GE(site.live_samples, 32u) << "the sampled program is too small to judge";
        EXPECT_GT(site.live_bytes_stderr, 0);
        EXPECT_NEAR(static_cast<double>(site.live_bytes), truth, 4.5 * site.live_bytes_stderr);
    }
    void expect_count(uint64_t figure, uint64_t truth, const StackView& site) const {
        if (!sampled()) {
            EXPECT_EQ(figure, truth);
            return;
        }
        // Blocks of one size: counts have the relative error of the bytes.
        EXPECT_NEAR(static_cast<double>(figure), static_cast<double>(truth),
                    4.5 * static_cast<double>(truth) * site.live_bytes_stderr / static_cast<double>(site.live_bytes));
    }
};

INSTANTIATE_TEST_SUITE_P(Mode, Programs, ::testing::Values(TraceMode::Full, TraceMode::Sampled),
                         [](const ::testing::TestParamInfo<TraceMode>& info) { return mode_name(info.param); });

// Sampled runs of the memo table keep blocks of 64 KiB instead of 1000 bytes: 1000 of them,
// about 118 samples.
const std::vector<std::string> kMemoSampled{"--block-size", "65536"};

TEST_P(Programs, MemoTableIsFlaggedAtRememberResult) {
    ScratchDir dir;
    std::string trace_path = dir / "memo.gtrace";
    std::vector<std::string> program = args({GT_PROGRAM_MEMO_TABLE, "1000", "2000"}, kMemoSampled);
    ProcessResult r = trace(dir, trace_path, program);
    program[2] = "0";
    EXPECT_EQ(r.out, run_process(program).out);
    Report report(analyze_json(dir, trace_path));
    const double block = sampled() ? 65536 : 1000;

    const int line = marker_line("memo_table.cpp", "remember_result");
    auto site = report.stack_at("remember_result", "memo_table.cpp", line);
    ASSERT_TRUE(site) << "no stack allocating at remember_result (memo_table.cpp:" << line << ")\n"
                             << report.summary();
    expect_bytes(*site, 1000 * block);
    expect_count(site->live_count, 1000u, *site);
    expect_count(site->allocations, 1000u, *site);
    EXPECT_TRUE(site->flagged) << report.summary();

    // Only this program's deliberate growth is blamed on remember_result; the transient
    // per-request allocations are never flagged.
    EXPECT_FALSE(report.is_flagged("scratch_work")) << report.summary();

    ProcessResult fail = growtrace({"analyze", trace_path, "--fail-on-growth"});
    EXPECT_EQ(fail.exit_code, kExitGrowthFound) << fail.err;
}

// A C++ cache owned by a static object is emptied by its destructor once main has returned
// (or exit() was called): that is shutdown, not the program's steady state, and the growth
// is still reported whole.
struct ShutdownCase {
    TraceMode mode;
    std::vector<std::string> flags;
};

class MemoTableFreedAtShutdown : public ::testing::TestWithParam<ShutdownCase> {};

TEST_P(MemoTableFreedAtShutdown, IsStillFlaggedWithEveryBlock) {
    ScratchDir dir;
    std::string trace = dir / "memo.gtrace";
    const bool sampled = GetParam().mode == TraceMode::Sampled;
    std::vector<std::string> args{GT_PROGRAM_MEMO_TABLE, "1000", "2000"};
    args.insert(args.end(), GetParam().flags.begin(), GetParam().flags.end());
    if (sampled) args.insert(args.end(), kMemoSampled.begin(), kMemoSampled.end());
    trace_program(dir, trace, args, 0, mode_options(GetParam().mode));
    nlohmann::json json = analyze_json(dir, trace);
    Report report(json);
    auto site = report.stack_at("remember_result", "memo_table.cpp", marker_line("memo_table.cpp", "remember_result"));
    ASSERT_TRUE(site) << report.summary();
    if (sampled) {
        EXPECT_GE(site->live_samples, 32u);
        EXPECT_NEAR(static_cast<double>(site->live_bytes), 1000.0 * 65536, 4.5 * site->live_bytes_stderr);
    } else {
        EXPECT_EQ(site->live_bytes, 1000u * 1000u);
        EXPECT_EQ(site->live_count, 1000u);
    }
    EXPECT_TRUE(site->flagged) << report.summary();
}

INSTANTIATE_TEST_SUITE_P(Exits, MemoTableFreedAtShutdown,
                         ::testing::Values(ShutdownCase{TraceMode::Full, {"--static-owner"}},
                                           ShutdownCase{TraceMode::Full, {"--static-owner", "--exit"}},
                                           ShutdownCase{TraceMode::Sampled, {"--static-owner"}},
                                           ShutdownCase{TraceMode::Sampled, {"--static-owner", "--exit"}}),
                         [](const ::testing::TestParamInfo<ShutdownCase>& info) {
                             return std::string(info.param.flags.size() == 1 ? "ReturnFromMain" : "ExitCall") +
                                    (info.param.mode == TraceMode::Sampled ? "Sampled" : "");
                         });

// A dictionary that grew for the whole run and is freed by a clean-up call just before main
// returns (before the shutdown mark): the growth before the clean-up is the finding, and the
// report says the memory was released at teardown. Sampled: fewer, bigger entries.
TEST_P(Programs, TableFreedByACleanUpCallIsFlaggedAndReleasedAtTeardown) {
    ScratchDir dir;
    std::string trace_path = dir / "teardown.gtrace";
    const std::vector<std::string> program =
        sampled() ? std::vector<std::string>{GT_PROGRAM_TEARDOWN_TABLE, "3000", "16384", "3"}
                  : std::vector<std::string>{GT_PROGRAM_TEARDOWN_TABLE, "300000", "32", "3"};
    ProcessResult r = trace(dir, trace_path, program);
    EXPECT_NE(r.out.find(sampled() ? "3000 entries of 16384 bytes" : "300000 entries of 32 bytes"), std::string::npos)
        << r.out;
    nlohmann::json json = analyze_json(dir, trace_path);
    const int line = marker_line("teardown_table.cpp", "intern_word");
    const double grown = sampled() ? 3000.0 * 16384 : 300000.0 * 32;
    bool found = false;
    for (const nlohmann::json& f : findings_of_kind(json, "unbounded_growth")) {
        const nlohmann::json& leaf = f["frames"][0];
        if (leaf["function"].get<std::string>().find("intern_word") == std::string::npos || leaf["line"] != line) continue;
        found = true;
        ASSERT_FALSE(f["teardown_at_s"].is_null()) << f.dump().substr(0, 1500);
        EXPECT_GT(f["teardown_at_s"].get<double>(), 2.5);
        EXPECT_LT(f["retained_bytes"].get<double>(), 0.01 * grown) << "freed before the shutdown mark";
        const double released = f["released_at_teardown_bytes"].get<double>();
        if (sampled()) EXPECT_NEAR(released, grown, 0.35 * grown);
        else EXPECT_NEAR(released, grown, 0.01 * grown);
    }
    EXPECT_TRUE(found) << "the table's growth before the clean-up is not a finding\n"
                       << json["groups"].dump().substr(0, 3000);
    ProcessResult text = growtrace({"analyze", trace_path});
    EXPECT_NE(text.out.find("released at teardown"), std::string::npos) << text.out;
    // The steady per-request churn of the other programs is no teardown.
    for (const nlohmann::json& g : json["groups"]) {
        if (!g["teardown_at_s"].is_null()) {
            EXPECT_NE(g["class"], "transient") << g.dump().substr(0, 1000);
        }
    }
}

TEST_P(Programs, BoundedLruIsNotFlagged) {
    ScratchDir dir;
    std::string trace_path = dir / "lru.gtrace";
    // Sampled: values of 64 KiB, so that the 500 live ones hold about 59 samples.
    trace(dir, trace_path, args({GT_PROGRAM_BOUNDED_LRU, "20000", "500", "1000", "10"}, {"65536"}));
    Report report(analyze_json(dir, trace_path));

    auto site = report.stack_at("lru_store", "bounded_lru.cpp", marker_line("bounded_lru.cpp", "lru_store"));
    ASSERT_TRUE(site) << report.summary();
    expect_bytes(*site, 500.0 * (sampled() ? 65536 : 1000));
    expect_count(site->live_count, 500u, *site);
    if (sampled()) {
        EXPECT_EQ(site->classification, "bounded") << report.summary();
        EXPECT_NEAR(static_cast<double>(site->allocations), 20000, 0.1 * 20000);  // about 2,360 samples
    } else {
        EXPECT_EQ(site->allocations, 20000u);
    }
    EXPECT_FALSE(site->flagged) << report.summary();
    EXPECT_TRUE(report.findings_empty()) << report.summary();

    ProcessResult pass = growtrace({"analyze", trace_path, "--fail-on-growth"});
    EXPECT_EQ(pass.exit_code, 0) << pass.err;
}

TEST_P(Programs, StartupTableWithChurnIsNotFlagged) {
    ScratchDir dir;
    std::string trace_path = dir / "startup.gtrace";
    // The 50 MB table holds about 100 samples as it is.
    trace(dir, trace_path, {GT_PROGRAM_STARTUP_TABLE_CHURN, "50", "4", "150", "1000", "10000"});
    Report report(analyze_json(dir, trace_path));

    auto table = report.stack_at("load_row", "startup_table_churn.cpp",
                                             marker_line("startup_table_churn.cpp", "load_row"));
    ASSERT_TRUE(table) << report.summary();
    expect_count(table->live_count, 50u * 1024u, *table);
    expect_bytes(*table, 50.0 * 1024 * 1024);
    if (sampled()) {
        EXPECT_EQ(table->classification, "bounded") << report.summary();
    }
    EXPECT_FALSE(table->flagged) << report.summary();
    EXPECT_TRUE(report.findings_empty()) << report.summary();
}

TEST_P(Programs, SlowLeakInThreadsIsFlaggedAtLeakALittle) {
    ScratchDir dir;
    std::string trace_path = dir / "leak.gtrace";
    // Sampled: leaks of 32 KiB instead of 256 bytes (about 97 samples), the churn as it is.
    trace(dir, trace_path, args({GT_PROGRAM_SLOW_LEAK_THREADS, "4", "400", "200", "4000"}, {"32768"}));
    Report report(analyze_json(dir, trace_path));

    auto site = report.stack_at("leak_a_little", "slow_leak_threads.cpp",
                                            marker_line("slow_leak_threads.cpp", "leak_a_little"));
    ASSERT_TRUE(site) << report.summary();
    expect_count(site->allocations, 1600u, *site);
    expect_count(site->live_count, 1600u, *site);
    expect_bytes(*site, 1600.0 * (sampled() ? 32768 : 256));
    EXPECT_TRUE(site->flagged) << report.summary();
    EXPECT_FALSE(report.is_flagged("churn_once")) << report.summary();
}

std::vector<std::string> with_kept_traces(std::vector<std::string> options) {
    options.push_back("--keep-helper-traces");
    return options;
}

TEST(FullPrograms, ForkAndExecWriteSeparateReadableTraces) {
    ScratchDir dir;
    std::string trace = dir / "fe.gtrace";
    // Every trace kept: by default the parent, a launcher that allocated little, would leave its
    // name to the exec'd image's trace (exec_chain_test.cpp).
    ProcessResult r = trace_program(dir, trace, {GT_PROGRAM_FORK_EXEC, GT_PROGRAM_MEMO_TABLE, "100", "1000"}, 0,
                                    {"--keep-helper-traces"});
    EXPECT_NE(r.out.find("memo_table: 100 entries"), std::string::npos) << r.out;

    // Three images, three traces (docs/architecture.md): fe.gtrace for the program until it
    // execs, fe.<childpid>.gtrace for the forked child, fe.exec1.gtrace for the exec'd image.
    auto child_pid_at = r.out.find("fork_exec: child ");
    ASSERT_NE(child_pid_at, std::string::npos) << r.out;
    int child_pid = std::stoi(r.out.substr(child_pid_at + 17));
    std::string child_trace = dir / fmt::format("fe.{}.gtrace", child_pid);
    std::string exec_trace = dir / "fe.exec1.gtrace";
    std::vector<std::string> traces;
    for (const std::string& name : dir.files()) {
        if (name.ends_with(".gtrace")) traces.push_back(name);
    }
    EXPECT_EQ(traces.size(), 3u) << fmt::format("{}", fmt::join(traces, " "));
    ASSERT_TRUE(fs::exists(child_trace)) << r.err;
    EXPECT_TRUE(fs::exists(exec_trace)) << "files: " << fmt::format("{}", fmt::join(traces, " "));
    if (!fs::exists(exec_trace)) {
        // Go on with whichever third trace there is, to check its contents all the same.
        for (const std::string& name : traces) {
            if (dir / name != trace && dir / name != child_trace) exec_trace = dir / name;
        }
    }
    EXPECT_NE(r.err.find("trace of a child process written to " + child_trace), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(exec_trace + "\n"), std::string::npos) << r.err;

    Report parent(analyze_json(dir, trace));
    auto parent_site = parent.stack_at("parent_keep", "fork_exec.cpp", marker_line("fork_exec.cpp", "parent_keep"));
    ASSERT_TRUE(parent_site) << parent.summary();
    EXPECT_EQ(parent_site->live_bytes, 10u * 10000u);
    EXPECT_FALSE(parent.stack_at("child_keep", "fork_exec.cpp", -1)) << "the child's allocations leaked into the parent's trace";

    Report child(analyze_json(dir, child_trace));
    auto child_site = child.stack_at("child_keep", "fork_exec.cpp", marker_line("fork_exec.cpp", "child_keep"));
    ASSERT_TRUE(child_site) << child.summary();
    EXPECT_EQ(child_site->live_bytes, 100u * 2000u);
    EXPECT_EQ(child_site->allocations, 100u);

    Report exec_image(analyze_json(dir, exec_trace));
    auto exec_site = exec_image.stack_at("remember_result", "memo_table.cpp",
                                                     marker_line("memo_table.cpp", "remember_result"));
    ASSERT_TRUE(exec_site) << exec_image.summary();
    EXPECT_EQ(exec_site->live_bytes, 100u * 1000u);
    EXPECT_FALSE(exec_image.stack_at("parent_keep", "fork_exec.cpp", -1));

    for (const std::string& t : {trace, child_trace, exec_trace}) {
        ProcessResult dump = growtrace({"dump", t});
        EXPECT_EQ(dump.exit_code, 0) << t << "\n" << dump.err;
        EXPECT_FALSE(dump.out.empty()) << t;
    }
}

// Sampled: a forked child and an exec'd image sample too (GROWTRACE_SAMPLE follows them), each
// trace says so, and the exec'd memo table (blocks of 256 KiB: about 78 samples) is flagged.
TEST(SampledPrograms, ForkedChildAndExecdImageAreSampledToo) {
    ScratchDir dir;
    std::string trace = dir / "fe.gtrace";
    ProcessResult r = trace_program(dir, trace,
                                    {GT_PROGRAM_FORK_EXEC, GT_PROGRAM_MEMO_TABLE, "200", "1000", "--block-size", "262144"},
                                    0, with_kept_traces(mode_options(TraceMode::Sampled)));
    std::vector<std::string> traces;
    for (const std::string& name : dir.files())
        if (name.ends_with(".gtrace")) traces.push_back(dir / name);
    ASSERT_EQ(traces.size(), 3u) << r.err;
    for (const std::string& t : traces) {
        ProcessResult dump = growtrace({"dump", t});
        EXPECT_EQ(dump.exit_code, 0) << t << "\n" << dump.err;
        EXPECT_NE(dump.out.find("Sampling mean_bytes=524288"), std::string::npos) << t;
        EXPECT_EQ(analyze_json(dir, t)["sampling"]["mean_bytes"], 524288) << t;
    }
    Report exec_image(analyze_json(dir, dir / "fe.exec1.gtrace"));
    auto site = exec_image.stack_at("remember_result", "memo_table.cpp", marker_line("memo_table.cpp", "remember_result"));
    ASSERT_TRUE(site) << exec_image.summary();
    EXPECT_TRUE(site->flagged) << exec_image.summary();
    EXPECT_NEAR(static_cast<double>(site->live_bytes), 200.0 * 262144, 4.5 * site->live_bytes_stderr);
}

TEST(FullPrograms, NoFollowFlagsStopTracingChildren) {
    ScratchDir dir;
    ProcessResult r = growtrace({"run", "-o", dir / "nf.gtrace", "--no-follow-fork", "--no-follow-exec", "--",
                                 GT_PROGRAM_FORK_EXEC, GT_PROGRAM_MEMO_TABLE, "20", "0"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("memo_table: 20 entries"), std::string::npos) << r.out;
    EXPECT_EQ(dir.files(), std::vector<std::string>{"nf.gtrace"}) << r.err;
}

TEST_P(Programs, DlopenedPluginFramesAreSymbolized) {
    ScratchDir dir;
    std::string trace_path = dir / "dl.gtrace";
    // Sampled: blocks of 64 KiB instead of 1500 bytes (about 118 samples).
    trace(dir, trace_path, args({GT_PROGRAM_DLOPEN_USER, GT_PLUGIN, "100", "10", "15000"}, {"65536"}));
    Report report(analyze_json(dir, trace_path));

    auto site = report.stack_at("plugin_remember", "plugin.cpp", marker_line("plugin.cpp", "plugin_remember"));
    ASSERT_TRUE(site) << report.summary();
    EXPECT_EQ(site->module_basename, "libgt_plugin.so");
    expect_bytes(*site, 1000.0 * (sampled() ? 65536 : 1500));
    expect_count(site->allocations, 1000u, *site);
    EXPECT_TRUE(site->flagged) << report.summary();
    EXPECT_TRUE(report.finding_names("plugin_remember", "libgt_plugin.so")) << report.summary();
}

// A program growing only inside a stripped library it calls, through two internal paths: one
// root cause, named by the program's calling frame, the library and the function it called. No
// frame of the report is a bare "??": the library's internal frames are named after the nearest
// symbol below them, or after the library and an offset.
TEST_P(Programs, GrowthInsideAStrippedLibraryIsOneCauseNamedByItsCall) {
    ScratchDir dir;
    std::string trace_path = dir / "library.gtrace";
    ProcessResult run = trace(dir, trace_path, {GT_PROGRAM_LIBRARY_GROWER, "2"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const nlohmann::json report = analyze_json(dir, trace_path);
    ASSERT_EQ(report["root_causes"].size(), 1u) << report["root_causes"].dump(1);
    const nlohmann::json& cause = report["root_causes"][0];
    EXPECT_EQ(cause["title"], fmt::format("memory allocated inside libgt_hidden_registry.so (registry_remember), called from "
                                          "(anonymous namespace)::handle_request(unsigned int) (library_grower.cpp:{}), keeps growing",
                                          marker_line("library_grower.cpp", "registry_remember")));
    ASSERT_EQ(cause["members"].size(), 1u) << cause.dump(1);
    EXPECT_EQ(cause["members"][0]["relation"], "same_library_call");
    size_t internal = 0;
    for (const nlohmann::json& finding : report["findings"])
        for (const nlohmann::json& frame : finding["frames"]) {
            const std::string function = frame.value("function", "");
            EXPECT_NE(function, "??") << frame.dump();
            if (function.starts_with("libgt_hidden_registry.so+0x")) ++internal;
        }
    EXPECT_GE(internal, 2u) << "the library's internal frames are named after it\n" << report["findings"].dump(1).substr(0, 3000);
}

// Sampled, with one sample point per byte on average: every kept block (100 KB or more) is then
// a sample with a probability of 1 - exp(-100000), weighted 1, so the figures are exact again
// and check each hook's sampled path (realloc's two halves, calloc, the aligned forms...).
TEST_P(Programs, EveryHookedFunctionIsAccounted) {
    ScratchDir dir;
    std::string trace = dir / "hooks.gtrace";
    trace_program(dir, trace, {GT_PROGRAM_ALL_HOOKS}, 0,
                  sampled() ? std::vector<std::string>{"--sample", "1"} : std::vector<std::string>{});
    nlohmann::json json = analyze_json(dir, trace);
    if (sampled()) {
        EXPECT_EQ(json["sampling"]["mean_bytes"], 1);
    }
    Report report(json);

    // Sizes from the table in all_hooks.cpp.
    const std::pair<const char*, uint64_t> kept[] = {
        {"keep_malloc", 100001},       {"keep_calloc", 100002},         {"keep_realloc", 100003},
        {"keep_reallocarray", 100004}, {"keep_posix_memalign", 100005}, {"keep_valloc", 100006},
        {"keep_memalign", 100007},     {"keep_aligned_alloc", 100016},  {"keep_new", 100009},
        {"keep_new_array", 100010},    {"keep_new_nothrow", 100011},    {"keep_pvalloc", 102400},
        {"keep_new_aligned", 100032},  {"keep_new_aligned_array", 200064},
    };
    for (const auto& [function, bytes] : kept) {
        SCOPED_TRACE(function);
        auto site = report.stack_in(function);
        ASSERT_TRUE(site) << report.summary();
        EXPECT_EQ(site->live_bytes, bytes);
        EXPECT_EQ(site->live_count, 1u);
        EXPECT_EQ(site->allocations, 1u);
    }
    // realloc and reallocarray freed their 70000-byte seeds: nothing allocated there is left.
    // (The rest of the heap at the end is the runtime's own: libstdc++'s 71 KiB exception
    // pool, stdio buffers, which may or may not be traced depending on initialisation order.)
    EXPECT_EQ(report.live_bytes_in("realloc_seed"), 0u) << report.summary();
    EXPECT_EQ(report.live_bytes_in("reallocarray_seed"), 0u) << report.summary();
    uint64_t kept_total = 0;
    for (const auto& [function, bytes] : kept) kept_total += bytes;
    EXPECT_GE(report.total("retained_bytes"), kept_total);
    // churn_all's 17 frees and the two seeds' frees were all seen.
    EXPECT_GE(report.total("frees"), 19u);
}

}  // namespace
}  // namespace growtrace::e2e
