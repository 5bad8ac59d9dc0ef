// End to end in memory: synthetic traces through analyze_trace, the reports, the commands'
// exit codes, and the dumper.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analyzer/analyzer.h"
#include "analyzer/dump.h"
#include "analyzer/report_json.h"
#include "analyzer/report_text.h"
#include "trace_builder.h"

namespace growtrace {
namespace {

using testing::TraceBuilder;
using testing::temp_trace_path;

constexpr uint64_t kMs = 1000000;  // ticks are nanoseconds in these traces

// 10 s of work in 100 ms runs. Stack 1 (thread 1) keeps 1,000 blocks of 1,000 bytes born
// throughout; stack 2 (thread 2) fills an LRU to 400 entries of 1,000 bytes, then evicts
// one per insert; stack 3 (thread 2) churns short-lived buffers.
std::string write_cache_trace(const std::string& name, bool with_end = true) {
    TraceBuilder b;
    b.process(777, 0, 0, "/usr/bin/cache_demo", std::string("cache_demo\0--n=1000", 19));
    b.stack_node(1, 0, 0x1000).stack_node(2, 0, 0x2000).stack_node(3, 0, 0x3000);
    std::deque<uint64_t> lru;
    uint64_t next_lru_addr = 0x20000000;
    for (int run = 0; run < 100; ++run) {
        const uint64_t t0 = run * 100 * kMs;
        // Thread 2's run is written before thread 1's, although thread 1's events of the same
        // period are interleaved in time with it: delivery order must not matter.
        b.thread(2, t0);
        for (int i = 0; i < 20; ++i) {
            const uint64_t t = t0 + i * 5 * kMs + 1;
            if (lru.size() == 400) {
                b.free(t, lru.front());
                lru.pop_front();
            }
            b.alloc(t + 1, 1000, next_lru_addr, 2);
            lru.push_back(next_lru_addr);
            next_lru_addr += 1024;
            b.alloc(t + 2, 50000, 0x30000000, 3).free(t + 3, 0x30000000);
        }
        b.thread(1, t0);
        for (int i = 0; i < 10; ++i) b.alloc(t0 + i * 10 * kMs + 2, 1000, 0x10000000 + (run * 10 + i) * 1024, 1);
        b.time_mark(t0 + 100 * kMs, t0 + 100 * kMs, 50u << 20);
        b.end_block(run % 2 ? format::Codec::Zstd : format::Codec::Raw);
    }
    if (with_end) b.end(10000 * kMs, 10000 * kMs);
    const std::string path = temp_trace_path(name);
    b.write(path);
    return path;
}

TEST(AnalyzerAnalysis, UnboundedCacheIsTheOnlyFinding) {
    AnalysisResult r = analyze_trace(write_cache_trace("cache"));
    EXPECT_TRUE(r.ended_cleanly);
    EXPECT_EQ(r.pid, 777u);
    EXPECT_EQ(r.command, "cache_demo --n=1000");
    EXPECT_NEAR(r.duration_s, 10.0, 0.01);
    ASSERT_EQ(r.findings.size(), 1u);
    const GroupReport& f = r.findings[0];
    EXPECT_EQ(f.retained_bytes, 1000000u);
    EXPECT_EQ(f.live_allocations, 1000u);
    EXPECT_NEAR(f.verdict.slope_bytes_per_s, 100000, 5000);
    EXPECT_GT(f.verdict.confidence, 0.8);
    ASSERT_EQ(f.frames.size(), 1u);
    EXPECT_EQ(f.frames[0].function, "0x1000");
    // The LRU is large but bounded; it is reported as a group, not a finding.
    bool lru_seen = false;
    for (const auto& g : r.groups)
        if (g.stack_ids == std::vector<uint64_t>{2}) {
            lru_seen = true;
            EXPECT_EQ(g.verdict.cls, GrowthClass::Bounded) << g.verdict.reason;
            EXPECT_EQ(g.retained_bytes, 400000u);
        }
    EXPECT_TRUE(lru_seen);
    EXPECT_EQ(r.totals.allocations, 1000u + 2000u + 2000u);
    EXPECT_EQ(r.totals.frees, 1600u + 2000u);
    EXPECT_EQ(r.totals.retained_bytes, 1400000u);
    EXPECT_EQ(r.totals.unmatched_frees, 0u);
    EXPECT_GE(r.totals.peak_bytes, 1400000u);
    EXPECT_FALSE(r.timeline.empty());
    EXPECT_EQ(r.timeline.back().rss_bytes, 50u << 20);
}

TEST(AnalyzerAnalysis, JsonReportHasTheDocumentedFields) {
    nlohmann::json j = report_json(analyze_trace(write_cache_trace("json")));
    EXPECT_EQ(j["format_version"], 1);
    EXPECT_EQ(j["trace_format_version"], format::kVersion);
    EXPECT_EQ(j["ended_cleanly"], true);
    EXPECT_EQ(j["totals"]["retained_bytes"], 1400000);
    ASSERT_EQ(j["findings"].size(), 1u);
    const auto& f = j["findings"][0];
    EXPECT_EQ(f["kind"], "unbounded_growth");
    EXPECT_EQ(f["retained_bytes"], 1000000);
    EXPECT_EQ(f["live_allocations"], 1000);
    for (const char* key : {"growth_bytes_per_s", "started_at_s", "confidence", "frames"}) EXPECT_TRUE(f.contains(key)) << key;
    for (const char* key : {"function", "file", "line", "module"}) EXPECT_TRUE(f["frames"][0].contains(key)) << key;
    EXPECT_TRUE(j["groups"].is_array());
    EXPECT_TRUE(j["timeline"][0].contains("rss_bytes"));
    EXPECT_TRUE(j["warnings"].is_array());
}

TEST(AnalyzerAnalysis, KilledProcessTraceIsAnalysedWithAWarning) {
    AnalysisResult r = analyze_trace(write_cache_trace("killed", /*with_end=*/false));
    EXPECT_FALSE(r.ended_cleanly);
    ASSERT_FALSE(r.warnings.empty());
    EXPECT_EQ(r.warnings[0],
              "trace has no end record (the process was killed or is still running); analysed up to its last flush");
    EXPECT_EQ(r.findings.size(), 1u);
}

TEST(AnalyzerAnalysis, CommandExitCodes) {
    const std::string path = write_cache_trace("exit");
    std::ostringstream out, err;
    AnalyzeOptions o;
    o.trace_path = path;
    EXPECT_EQ(analyze_command(o, out, err), kExitOk);
    EXPECT_NE(out.str().find("1 unbounded growth finding"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("not findings: 1 bounded group holds 400.0 KB"), std::string::npos) << out.str();
    o.fail_on_growth = true;
    EXPECT_EQ(analyze_command(o, out, err), kExitGrowthFound);
    o.trace_path = "/nonexistent.gtrace";
    std::ostringstream err2;
    EXPECT_EQ(analyze_command(o, out, err2), kExitError);
    const std::string message = err2.str();
    EXPECT_EQ(message.rfind("growtrace: error: cannot open trace /nonexistent.gtrace", 0), 0u) << message;
    EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1);
}

TEST(AnalyzerAnalysis, BoundedOnlyTraceHasNoFindings) {
    TraceBuilder b;
    b.process(1, 0, 0).stack_node(5, 0, 0x5000).thread(1, 0);
    // A 20 MB table loaded in the first 0.5 s, then 9.5 s of small churn.
    for (int i = 0; i < 200; ++i) b.alloc(i * 2 * kMs, 100000, 0x100000000 + i * 0x20000, 5);
    for (int i = 0; i < 1000; ++i) b.alloc(500 * kMs + i * 9 * kMs, 64, 0x50, 6).free(500 * kMs + i * 9 * kMs + 1, 0x50);
    b.end(10000 * kMs, 10000 * kMs);
    const std::string path = temp_trace_path("bounded");
    b.write(path);
    AnalysisResult r = analyze_trace(path);
    EXPECT_TRUE(r.findings.empty());
    ASSERT_FALSE(r.groups.empty());
    EXPECT_EQ(r.groups[0].verdict.cls, GrowthClass::Bounded);
    EXPECT_EQ(r.groups[0].retained_bytes, 20000000u);
}

TEST(AnalyzerAnalysis, DumpPrintsEveryRecordWithBlockOffsets) {
    TraceBuilder b;
    b.process(9, 0, 0).thread(3, 100).alloc(110, 32, 0xabc0, 1).raw_record(0x7d, {1, 2});
    b.end_block(format::Codec::Zstd);
    b.end(200, 200);
    const std::string path = temp_trace_path("dump");
    b.write(path);
    std::ostringstream out, err;
    EXPECT_EQ(dump_command(path, out, err), kExitOk);
    const std::string s = out.str();
    EXPECT_NE(s.find("block 0 at offset 16: codec zstd"), std::string::npos) << s;
    EXPECT_NE(s.find("Alloc tid=3 ticks=110 size=32 addr=0xabc0 stack=1"), std::string::npos) << s;
    EXPECT_NE(s.find("kind 0x7d (not decoded) length=2"), std::string::npos) << s;
    EXPECT_NE(s.find("End ticks=200"), std::string::npos) << s;
    EXPECT_NE(s.find("ended cleanly"), std::string::npos) << s;
}

}  // namespace
}  // namespace growtrace

namespace growtrace {
namespace {

// A list cut short says so: "not findings" names three caches and counts the rest.
TEST(TextReport, NotFindingCachesBeyondThreeAreCounted) {
    AnalysisResult r;
    r.pid = 7;
    r.command = "python app.py";
    for (const char* name : {"a.one", "a.two", "a.three", "a.four", "a.five"}) {
        CacheReport c;
        c.cache.name = name;
        c.cache.reason = "bounded";
        r.caches.push_back(c);
    }
    std::ostringstream out;
    write_text_report(r, out);
    EXPECT_NE(out.str().find("not findings: 5 caches that stopped growing: a.one (bounded); a.two (bounded); a.three "
                             "(bounded); and 2 more (growtrace analyze --json lists them all)\n"),
              std::string::npos)
        << out.str();
    r.caches.resize(3);
    std::ostringstream three;
    write_text_report(r, three);
    EXPECT_EQ(three.str().find("more"), std::string::npos) << three.str();
}

}  // namespace
}  // namespace growtrace
