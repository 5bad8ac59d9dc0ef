// Findings of several processes merged: by program (command lines differing only in numbers
// are one) and by what grows (same cache, class or frames), never across programs.
#include <gtest/gtest.h>

#include "analyzer/analysis/merged_analysis.h"
#include "analyzer/report/report_merged.h"
#include "analyzer/analysis/root_causes.h"

namespace growtrace {
namespace {

AnalysisResult process(uint64_t pid, std::vector<std::string> argv) {
    AnalysisResult r;
    r.pid = pid;
    r.exe = "/usr/bin/python3.11";
    r.argv = std::move(argv);
    for (const auto& a : r.argv) r.command += (r.command.empty() ? "" : " ") + a;
    return r;
}

GroupReport growing_stack(const std::string& function, uint64_t retained, double slope, uint64_t ip) {
    GroupReport g;
    Frame f;
    f.function = function;
    f.file = "app.py";
    f.line = 7;
    f.module_path = "python";
    f.ip = ip;  // differs between processes: not part of the identity
    g.frames = {f};
    g.retained_bytes = retained;
    g.verdict.cls = GrowthClass::Unbounded;
    g.verdict.slope_bytes_per_s = slope;
    g.verdict.started_at_s = static_cast<double>(ip % 10);
    return g;
}

TEST(MergedAnalysis, ProgramKeyMasksNumbersOnly) {
    const AnalysisResult a = process(1, {"python", "-c", "spawn_main(tracker_fd=5, pipe_handle=7)"});
    const AnalysisResult b = process(2, {"python", "-c", "spawn_main(tracker_fd=5, pipe_handle=11)"});
    const AnalysisResult c = process(3, {"python", "other.py"});
    EXPECT_EQ(program_key(a), program_key(b));
    EXPECT_NE(program_key(a), program_key(c));
    AnalysisResult d = process(4, {"python", "-c", "spawn_main(tracker_fd=5, pipe_handle=7)"});
    d.exe = "/usr/bin/python3.12";
    EXPECT_NE(program_key(a), program_key(d)) << "another executable is another program";
}

TEST(MergedAnalysis, SameStackInWorkersIsOneFindingWithEachFigures) {
    std::vector<AnalysedTrace> set;
    set.push_back({"parent.gtrace", process(100, {"python", "server.py", "--port", "8000"})});
    set.push_back({"w1.gtrace", process(101, {"python", "server.py", "--port", "8000"})});
    set.push_back({"w2.gtrace", process(102, {"python", "server.py", "--port", "8000"})});
    set.push_back({"other.gtrace", process(200, {"python", "batch.py"})});
    set[1].result.findings.push_back(growing_stack("remember", 3'000'000, 100'000, 0x11));
    set[2].result.findings.push_back(growing_stack("remember", 3'200'000, 300'000, 0x22));
    // The same frames in another program: a finding of its own.
    set[3].result.findings.push_back(growing_stack("remember", 1'000'000, 50'000, 0x33));
    // Another stack in one worker only.
    set[2].result.findings.push_back(growing_stack("log_line", 500'000, 10'000, 0x44));

    const MergedAnalysis m = merge_findings(set);
    ASSERT_EQ(m.programs.size(), 2u);
    EXPECT_EQ(m.programs[0].traces, (std::vector<size_t>{0, 1, 2}));
    EXPECT_EQ(m.programs[1].traces, (std::vector<size_t>{3}));
    ASSERT_EQ(m.findings.size(), 3u);

    const MergedFinding& pool = m.findings[0];
    EXPECT_EQ(pool.program, 0u);
    ASSERT_EQ(pool.in.size(), 2u);
    EXPECT_EQ(pool.in[0].trace, 2u) << "the worker holding the most first";
    EXPECT_EQ(pool.in[1].trace, 1u);
    EXPECT_DOUBLE_EQ(pool.total.retained_bytes, 6'200'000);
    EXPECT_DOUBLE_EQ(pool.total.growth_bytes_per_s, 400'000);
    EXPECT_DOUBLE_EQ(pool.min_retained, 3'000'000);
    EXPECT_DOUBLE_EQ(pool.max_retained, 3'200'000);
    EXPECT_DOUBLE_EQ(pool.total.started_at_s, 4) << "the earliest start (7 s and 4 s)";

    EXPECT_EQ(m.findings[1].program, 1u);
    ASSERT_EQ(m.findings[1].in.size(), 1u);
    EXPECT_EQ(m.findings[1].in[0].trace, 3u);
    ASSERT_EQ(m.findings[2].in.size(), 1u);
    EXPECT_EQ(set[m.findings[2].in[0].trace].result.findings[m.findings[2].in[0].index].frames[0].function, "log_line");
}

TEST(MergedAnalysis, CacheFindingsLeadAndStacksExplainedInEveryProcessAreMarked) {
    std::vector<AnalysedTrace> set;
    for (uint64_t pid : {1, 2}) {
        AnalysedTrace t{"w.gtrace", process(pid, {"python", "app.py"})};
        CacheReport c;
        c.cache.name = "app.adapter_for";
        c.cache.location = "app.py:3";
        c.cache.retained_bytes = 1000 * pid;
        c.cache.unbounded = true;
        t.result.cache_findings.push_back(c);
        GroupReport g = growing_stack("build", 5'000'000, 1, pid);
        g.explained_by_cache = pid == 1 ? "app.adapter_for" : "";
        t.result.findings.push_back(g);
        GroupReport h = growing_stack("fill", 900, 1, pid + 2);
        h.explained_by_cache = "app.adapter_for";
        t.result.findings.push_back(h);
        set.push_back(std::move(t));
    }
    const MergedAnalysis m = merge_findings(set);
    ASSERT_EQ(m.findings.size(), 3u);
    EXPECT_EQ(m.findings[0].kind, FindingKind::Cache);
    EXPECT_EQ(m.findings[0].in.size(), 2u);
    EXPECT_DOUBLE_EQ(m.findings[0].total.retained_bytes, 3000);
    // "build" is the cache's memory in one process only: still a finding of its own.
    EXPECT_EQ(m.findings[1].kind, FindingKind::Stack);
    EXPECT_EQ(m.findings[1].explained_by_cache, "");
    EXPECT_EQ(m.findings[2].explained_by_cache, "app.adapter_for");
}

// The merged report has root causes of its own, over the merged findings: each process's tree
// decides where a merged finding goes (here the cache, with its entries' stack as evidence).
TEST(MergedAnalysis, RootCausesAreMadeOverTheMergedFindings) {
    AnalysedTraceSet set;
    for (uint64_t pid : {1, 2}) {
        AnalysedTrace t{"w.gtrace", process(pid, {"python", "app.py"})};
        CacheReport c;
        c.cache.name = "app.adapter_for";
        c.cache.location = "app.py:3";
        c.cache.retained_bytes = 1000;
        c.cache.unbounded = true;
        t.result.cache_findings.push_back(c);
        GroupReport g = growing_stack("fill", 900, 1, pid + 2);
        g.explained_by_cache = "app.adapter_for";
        t.result.findings.push_back(g);
        t.result.findings.push_back(growing_stack("other", 500, 1, pid + 4));
        t.result.findings.back().frames.front().function = "other";
        t.result.root_causes = find_root_causes(t.result);
        set.traces.push_back(std::move(t));
    }
    const MergedAnalysis m = merge_findings(set.traces);
    const nlohmann::json doc = merged_report_json(set, m);
    ASSERT_EQ(doc["findings"].size(), 3u) << doc["findings"].dump(1);
    ASSERT_EQ(doc["root_causes"].size(), 2u) << doc["root_causes"].dump(1);
    const nlohmann::json& cache = doc["root_causes"][0];
    EXPECT_EQ(cache["kind"], "cache_growth");
    EXPECT_EQ(cache["title"], "cache app.adapter_for keeps growing");
    ASSERT_EQ(cache["members"].size(), 1u);
    EXPECT_EQ(cache["members"][0]["relation"], "holds_entries");
    EXPECT_EQ(cache["retained_bytes"], 2000);
    for (const nlohmann::json& f : doc["findings"]) EXPECT_TRUE(f.contains("root_cause")) << f.dump();
    EXPECT_EQ(doc["findings"][cache["members"][0]["finding"].get<size_t>() - 1]["role"], "evidence");
}

}  // namespace
}  // namespace growtrace
