// End to end in memory: synthetic traces through analyze_trace, the reports, the commands'
// exit codes, and the dumper.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <cmath>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tools/analyze_command.h"
#include "analyzer/report/dump.h"
#include "analyzer/report/report_json.h"
#include "analyzer/report/report_text.h"
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

// A ShortLivedSamples record: each count with its interval's start, stack and size.
TEST(AnalyzerAnalysis, DumpPrintsCountedShortLivedSamples) {
    format::RecordEncoder rec(format::RecordKind::ShortLivedSamples);
    rec.varint(5000).varint(8).varint(1024).varint(2);      // last, shift, first interval, 2 intervals
    rec.varint(0).varint(1).varint(7).varint(1).varint(64).varint(3);  // interval 0: stack 7, 3 x 64
    rec.varint(2).varint(1).varint(9).varint(1).varint(80).varint(1);  // interval 2: stack 9, 1 x 80
    TraceBuilder b;
    b.process(9, 0, 0).record(format::RecordEncoder(format::RecordKind::Sampling).varint(4096)).record(rec);
    b.end(6000, 6000);
    const std::string path = temp_trace_path("dump_short_lived");
    b.write(path, format::kSampledVersion);
    std::ostringstream out, err;
    EXPECT_EQ(dump_command(path, out, err), kExitOk);
    EXPECT_NE(out.str().find("ShortLivedSamples last_ticks=5000 interval=256 ticks "
                             "[1024:stack=7,size=64x3 1536:stack=9,size=80x1]"),
              std::string::npos)
        << out.str();
}

// --- sampled traces ---

// The cache_demo program of write_cache_trace, made 20 times bigger (20,000 kept blocks) and
// recorded as the tracer does with --sample 64K: only the samples and their frees, after a
// Sampling record. Each block is a sample with probability 1 - exp(-size/64K).
std::string write_sampled_trace(const std::string& name, uint64_t seed, uint32_t version = format::kVersion) {
    constexpr uint64_t kPeriod = 64 * 1024;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    auto sampled = [&](uint64_t size) { return u(rng) < -std::expm1(-double(size) / kPeriod); };
    TraceBuilder b;
    b.process(778, 0, 0, "/usr/bin/cache_demo", "cache_demo");
    if (version >= 3) b.record(format::RecordEncoder(format::RecordKind::Sampling).varint(kPeriod));
    b.stack_node(1, 0, 0x1000).stack_node(2, 0, 0x2000).stack_node(3, 0, 0x3000).stack_node(4, 0, 0x4000);
    std::deque<std::pair<uint64_t, bool>> lru;  // address, sampled
    uint64_t next_lru_addr = 0x20000000;
    for (int run = 0; run < 100; ++run) {
        const uint64_t t0 = run * 100 * kMs;
        b.thread(2, t0);
        for (int i = 0; i < 400; ++i) {
            const uint64_t t = t0 + i * kMs / 4 + 1;
            if (lru.size() == 4000) {
                if (lru.front().second) b.free(t, lru.front().first);
                lru.pop_front();
            }
            const bool s = sampled(1000);
            if (s) b.alloc(t + 1, 1000, next_lru_addr, 2);
            lru.emplace_back(next_lru_addr, s);
            next_lru_addr += 1024;
            if (sampled(50000)) b.alloc(t + 2, 50000, 0x30000000, 3).free(t + 3, 0x30000000);
        }
        b.thread(1, t0);
        for (int i = 0; i < 200; ++i)
            if (sampled(1000)) b.alloc(t0 + i * kMs / 2 + 2, 1000, 0x10000000 + (run * 200 + i) * 1024, 1);
        // A rarely sampled stack: 8 blocks of 1 KB kept per run, about 12 samples in all.
        for (int i = 0; i < 8; ++i)
            if (sampled(1024)) b.alloc(t0 + i * kMs + 3, 1024, 0x40000000 + (run * 8 + i) * 8192, 4);
        b.time_mark(t0 + 100 * kMs, t0 + 100 * kMs, 50u << 20);
        b.end_block(format::Codec::Zstd);
    }
    b.end(10000 * kMs, 10000 * kMs);
    const std::string path = temp_trace_path(name);
    b.write(path, version);
    return path;
}

TEST(AnalyzerAnalysis, SampledTraceGivesTheSameVerdictsWithEstimates) {
    // Over several samplings: the verdicts never change, the estimate of the growing stack's
    // 20 MB is within four of its own standard errors.
    for (uint64_t seed = 1; seed <= 5; ++seed) {
        SCOPED_TRACE(seed);
        AnalysisResult r = analyze_trace(write_sampled_trace("sampled", seed));
        EXPECT_EQ(r.sample_period, 64u * 1024);
        ASSERT_EQ(r.findings.size(), 1u);
        const GroupReport& f = r.findings[0];
        EXPECT_EQ(f.stack_ids, std::vector<uint64_t>{1});
        EXPECT_GT(f.live_samples, 250u);
        EXPECT_EQ(f.samples, f.live_samples);
        EXPECT_NEAR(static_cast<double>(f.retained_bytes), 20e6, 4 * f.retained_bytes_stderr);
        // Poisson: the relative error is about 1 / sqrt(samples).
        EXPECT_NEAR(f.retained_bytes_stderr / static_cast<double>(f.retained_bytes), 1 / std::sqrt(double(f.live_samples)),
                    0.05 / std::sqrt(double(f.live_samples)));
        EXPECT_NEAR(static_cast<double>(f.live_allocations), 20000, 4 * 20000 / std::sqrt(double(f.live_samples)));
        for (const auto& g : r.groups) {
            if (g.stack_ids == std::vector<uint64_t>{2}) {
                EXPECT_EQ(g.verdict.cls, GrowthClass::Bounded) << g.verdict.reason;
            }
            if (g.stack_ids == std::vector<uint64_t>{3}) {
                EXPECT_EQ(g.verdict.cls, GrowthClass::Transient) << g.verdict.reason;
            }
            if (g.stack_ids == std::vector<uint64_t>{4}) {
                EXPECT_EQ(g.verdict.cls, GrowthClass::Undetermined) << g.verdict.reason;
                EXPECT_NE(g.verdict.reason.find("too thinly sampled to judge"), std::string::npos);
            }
        }
    }
}

TEST(AnalyzerAnalysis, SampledTraceReportsSayTheFiguresAreEstimates) {
    const std::string path = write_sampled_trace("sampled-report", 9);
    AnalysisResult r = analyze_trace(path);
    nlohmann::json j = report_json(r);
    EXPECT_EQ(j["sampling"]["mean_bytes"], 64 * 1024);
    EXPECT_GT(j["totals"]["samples"].get<uint64_t>(), 0u);
    EXPECT_TRUE(j["totals"]["retained_bytes"].is_number_unsigned()) << "estimates stay whole numbers";
    const nlohmann::json& f = j["findings"][0];
    EXPECT_GT(f["retained_bytes_stderr"].get<double>(), 0);
    EXPECT_GT(f["live_samples"].get<uint64_t>(), 0u);
    EXPECT_TRUE(f["retained_bytes"].is_number_unsigned());
    bool undetermined = false;
    for (const auto& g : j["groups"]) undetermined |= g["class"] == "undetermined";
    EXPECT_TRUE(undetermined) << j["groups"].dump();

    std::ostringstream text;
    write_text_report(r, text);
    EXPECT_NE(text.str().find("sampled trace: one sample per 65.5 KB"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find(" ± "), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("too thinly sampled to judge"), std::string::npos) << text.str();
}

// A full trace says so: sampling.mean_bytes 0, no uncertainty, samples = allocations.
TEST(AnalyzerAnalysis, FullTraceHasExactFiguresAndNoSampling) {
    nlohmann::json j = report_json(analyze_trace(write_cache_trace("full-json")));
    EXPECT_EQ(j["sampling"]["mean_bytes"], 0);
    EXPECT_EQ(j["totals"]["samples"], j["totals"]["allocations"]);
    for (const auto& f : j["findings"]) EXPECT_EQ(f["retained_bytes_stderr"], 0.0);
}

// Traces of format versions 1 and 2 are read as full traces (every allocation recorded); a v2 file
// holding a Sampling record (written by no tracer) would still be honoured.
TEST(AnalyzerAnalysis, OlderFormatVersionsAreStillRead) {
    AnalysisResult r = analyze_trace(write_sampled_trace("v2", 3, 2));
    EXPECT_EQ(r.trace_format_version, 2u);
    EXPECT_EQ(r.sample_period, 0u);
    std::ostringstream out, err;
    AnalyzeOptions o;
    o.trace_path = write_cache_trace("v1-again");
    EXPECT_EQ(analyze_command(o, out, err), kExitOk) << err.str();
}

// A trace of a day (a time mark every 100 ms: 864,000 of them) keeps a bounded RSS series and
// fits its clock without a point per mark; the timeline still ends with the last RSS.
TEST(AnalyzerAnalysis, DayLongTraceKeepsTimeMarksBounded) {
    constexpr uint64_t kTick = 100 * kMs;
    constexpr int kMarks = 864000;
    TraceBuilder b;
    b.process(5, 0, 0).stack_node(1, 0, 0x1000);
    for (int i = 1; i <= kMarks; ++i) {
        // ticks run at 2 per ns, as a 2 GHz TSC would
        b.time_mark(2 * i * kTick, i * kTick, (uint64_t{100} + static_cast<uint64_t>(i) * 100 / kMarks) << 20);
        if (i % 36000 == 0) b.thread(1, 2 * i * kTick).alloc(2 * i * kTick, 1 << 20, 0x10000000 + i, 1);
        if (i % 10000 == 0) b.end_block(format::Codec::Zstd);
    }
    b.end(2 * kMarks * kTick, kMarks * kTick);
    AnalysisResult r = analyze_trace([&] {
        const std::string path = temp_trace_path("day");
        b.write(path);
        return path;
    }());
    EXPECT_NEAR(r.duration_s, 86400, 1);
    ASSERT_FALSE(r.timeline.empty());
    EXPECT_LE(r.timeline.size(), 512u);
    EXPECT_NEAR(static_cast<double>(r.timeline.back().rss_bytes), 200.0 * (1 << 20), 2.0 * (1 << 20));
    EXPECT_GT(r.timeline[r.timeline.size() / 2].rss_bytes, 140u << 20);
    EXPECT_EQ(r.totals.retained_bytes, 24.0 * (1 << 20));
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
