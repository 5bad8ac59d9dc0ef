// Growth judged against the work done, not the clock (analyzer/model/work_axis.h): the windows of
// equal work, and whole synthetic traces whose verdict a stall or a change of pace must not
// change.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tools/analyze_command.h"
#include "analyzer/model/work_axis.h"
#include "format/trace_format.h"
#include "trace_builder.h"

namespace growtrace {
namespace {

using testing::TraceBuilder;
using testing::temp_trace_path;

uint32_t first_window_of(const WorkAxis& axis, size_t t) { return axis.parts.at(t).at(0).window; }

TEST(WorkAxis, TimeWindowsWithoutWorkJoinTheirNeighbours) {
    // 4 busy windows, 4 idle ones (a stall), 4 busy ones, each busy one 10 events.
    std::vector<double> events{10, 10, 10, 10, 0, 0, 0, 0, 10, 10, 10, 10};
    WorkAxis axis = build_work_axis(events, events, 1.0, 0, events.size() - 1);
    ASSERT_EQ(axis.size(), 8u);
    EXPECT_EQ(first_window_of(axis, 3), 3u);
    EXPECT_EQ(first_window_of(axis, 4), 4u) << "the stall opens no window of its own";
    EXPECT_EQ(first_window_of(axis, 8), 4u);
    EXPECT_DOUBLE_EQ(axis.start_s[4], 4.0);
    EXPECT_DOUBLE_EQ(axis.end_s[4], 9.0);
    EXPECT_DOUBLE_EQ(axis.allocations[4], 10.0);
    EXPECT_EQ(axis.work_end, 7u);
}

TEST(WorkAxis, ABurstIsCutIntoWindowsOfEvenWork) {
    // One time window of 0.5 s holds half the work; eight quiet ones share the rest.
    std::vector<double> events{2, 2, 2, 2, 16, 2, 2, 2, 2};
    WorkAxis axis = build_work_axis(events, events, 0.5, 0, events.size() - 1);
    ASSERT_EQ(axis.size(), 9u);
    const double share = 32.0 / 9;
    for (size_t k = 0; k < axis.size(); ++k) EXPECT_NEAR(axis.allocations[k], share, 1e-9) << k;
    double burst = 0;
    for (const WorkAxis::Part& part : axis.parts[4]) burst += part.fraction;
    EXPECT_NEAR(burst, 1.0, 1e-12);
    EXPECT_GE(axis.parts[4].size(), 5u) << "16 events over shares of 3.6";
    // Times are where the work crosses each share, the burst's events spread over its 0.5 s.
    for (size_t k = 1; k < axis.size(); ++k) EXPECT_DOUBLE_EQ(axis.start_s[k], axis.end_s[k - 1]);
    EXPECT_DOUBLE_EQ(axis.start_s[0], 0.0);
    EXPECT_DOUBLE_EQ(axis.end_s.back(), 4.5);
    EXPECT_LT(axis.end_s[3] - axis.start_s[3], 0.5) << "a window inside the burst lasts less than it";
}

TEST(WorkAxis, WindowsAfterTheWorkStayApart) {
    // The work ends at window 3; windows 4 and 5 hold the shutdown's collection.
    std::vector<double> events{0, 5, 5, 5, 100, 100};
    WorkAxis axis = build_work_axis(events, std::vector<double>(6, 1), 1.0, 1, 3);
    ASSERT_EQ(axis.size(), 5u);
    EXPECT_EQ(axis.work_end, 2u);
    EXPECT_EQ(first_window_of(axis, 0), 0u);
    EXPECT_DOUBLE_EQ(axis.start_s[0], 1.0) << "the span starts where the work does";
    EXPECT_EQ(first_window_of(axis, 4), 3u);
    EXPECT_EQ(first_window_of(axis, 5), 4u);
}

constexpr uint64_t kMs = 1000000;  // ticks are nanoseconds in these traces

// A program serving `requests` requests, each allocating 9 short-lived blocks and, while
// `kept(request)`, one 1,000-byte block it keeps (a cache entry). `at(request)` is when the
// request runs, in ms: a stall or a change of pace is only a change of `at`.
template <class At, class Kept>
std::string write_requests_trace(const std::string& name, int requests, At at, Kept kept) {
    TraceBuilder b;
    b.process(4242, 0, 0, "/usr/bin/service", std::string("service", 7));
    b.stack_node(1, 0, 0x1000).stack_node(2, 0, 0x2000);
    b.thread(1, 0);
    uint64_t kept_addr = 0x10000000;
    uint64_t last = 0;
    for (int r = 0; r < requests; ++r) {
        const uint64_t t = static_cast<uint64_t>(at(r) * kMs);
        for (int i = 0; i < 9; ++i) b.alloc(t + 2 * i, 200, 0x30000000 + i * 256, 2);
        for (int i = 0; i < 9; ++i) b.free(t + 2 * i + 1, 0x30000000 + i * 256);
        if (kept(r)) {
            b.alloc(t + 20, 1000, kept_addr, 1);
            kept_addr += 1024;
        }
        if (r % 100 == 99) b.end_block();
        last = t + 21;
    }
    b.end_block();
    b.end(last + kMs, last + kMs);
    const std::string path = temp_trace_path(name);
    b.write(path);
    return path;
}

const GroupReport* group_of_stack(const AnalysisResult& r, uint64_t stack) {
    for (const auto* list : {&r.findings, &r.groups})
        for (const GroupReport& g : *list)
            if (g.stack_ids == std::vector<uint64_t>{stack}) return &g;
    return nullptr;
}

// A cache that gains one entry per request, served at a steady pace for 4 s, then a 12-second
// stall (a stopped process, a machine too busy to run it), then 4 s more: measured against the
// clock its growth stops for the middle half of the run; measured against the work it never
// does.
TEST(WorkAxisVerdicts, AStallDoesNotMakeGrowthAPlateau) {
    const std::string path = write_requests_trace(
        "stalled", 2000, [](int r) { return r < 1000 ? r * 4.0 : 12000 + r * 4.0; }, [](int) { return true; });
    AnalysisResult r = analyze_trace(path);
    const GroupReport* cache = group_of_stack(r, 1);
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(cache->verdict.cls, GrowthClass::Unbounded) << cache->verdict.reason;
    // 1,000 bytes kept per request of 10 allocations.
    EXPECT_NEAR(cache->verdict.bytes_per_1k_allocations, 100000, 2000);
    // 2 MB over the 20 s from the first request to the last.
    EXPECT_NEAR(cache->verdict.slope_bytes_per_s, 2000000 / 20.0, 2000);
}

// A cache that fills during the first half of the requests and then stops: the first half
// crawls (19 s), the second half is a burst (1 s). Against the clock it grows through 95 % of
// the run; against the work it stops halfway.
TEST(WorkAxisVerdicts, AChangeOfPaceDoesNotMakeAPlateauLookLikeGrowth) {
    const std::string path = write_requests_trace(
        "pace", 2000, [](int r) { return r < 1000 ? r * 19.0 : 19000 + (r - 1000) * 1.0; },
        [](int r) { return r < 1000; });
    AnalysisResult r = analyze_trace(path);
    const GroupReport* cache = group_of_stack(r, 1);
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(cache->verdict.cls, GrowthClass::Bounded) << cache->verdict.reason;
    EXPECT_TRUE(r.findings.empty());
}

// A sampled trace (one sample per 512 KiB): each request keeps a 64 KiB block (nearly every one
// a sample) and makes 50 short-lived 16-byte ones, a few of which are sampled, each standing
// for some 32,000 allocations. The work must not be counted in those estimates, whose weight
// falls on a handful of windows: the kept blocks grow with every request.
TEST(WorkAxisVerdicts, SampledSmallBlocksDoNotBendTheWork) {
    constexpr uint64_t kPeriod = 512 * 1024;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
        SCOPED_TRACE(seed);
        std::mt19937_64 rng(seed);
        std::uniform_real_distribution<double> u(0, 1);
        auto sampled = [&](uint64_t size) { return u(rng) < -std::expm1(-double(size) / kPeriod); };
        TraceBuilder b;
        b.process(4343, 0, 0, "/usr/bin/memo", std::string("memo", 4));
        b.record(format::RecordEncoder(format::RecordKind::Sampling).varint(kPeriod));
        b.stack_node(1, 0, 0x1000).stack_node(2, 0, 0x2000);
        b.thread(1, 0);
        uint64_t t = 0;
        for (int r = 0; r < 1000; ++r) {
            t = static_cast<uint64_t>(r) * 2 * kMs;
            for (int i = 0; i < 50; ++i)
                if (sampled(16)) b.alloc(t + i, 16, 0x30000000, 2).free(t + i, 0x30000000);
            if (sampled(65536)) b.alloc(t + 60, 65536, 0x10000000 + r * 0x20000ull, 1);
            if (r % 100 == 99) b.end_block();
        }
        b.end_block();
        b.end(t + kMs, t + kMs);
        const std::string path = temp_trace_path("sampled_memo");
        b.write(path);
        AnalysisResult result = analyze_trace(path);
        const GroupReport* kept = group_of_stack(result, 1);
        ASSERT_NE(kept, nullptr);
        EXPECT_EQ(kept->verdict.cls, GrowthClass::Unbounded) << kept->verdict.reason;
    }
}

}  // namespace
}  // namespace growtrace
