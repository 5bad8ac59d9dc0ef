// Significance of unbounded growth (analyzer/model/growth_classifier.h, judge_significance): what a
// user would act on is a grower that will matter in a day or that is a real part of what the
// heap gains; a slow trickle beside a large grower is listed, not reported as a finding.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/analyze_command.h"
#include "analyzer/model/growth_classifier.h"
#include "trace_builder.h"

namespace growtrace {
namespace {

using testing::TraceBuilder;
using testing::temp_trace_path;

constexpr uint64_t kMs = 1000000;  // ticks are nanoseconds in these traces
constexpr uint64_t kSecond = 1000 * kMs;

// One request a second for `seconds`: stack 1 keeps `fast_bytes`, stack 2 keeps `slow_bytes`,
// each request also makes a few short-lived blocks (stack 3).
std::string write_two_growers(const std::string& name, int seconds, uint32_t fast_bytes, uint32_t slow_bytes) {
    TraceBuilder b;
    b.process(5151, 0, 0, "/usr/bin/service", std::string("service", 7));
    b.stack_node(1, 0, 0x1000).stack_node(2, 0, 0x2000).stack_node(3, 0, 0x3000);
    b.thread(1, 0);
    uint64_t fast_addr = 0x100000000, slow_addr = 0x800000000, last = 0;
    for (int r = 0; r < seconds; ++r) {
        const uint64_t t = static_cast<uint64_t>(r) * kSecond;
        for (int i = 0; i < 4; ++i) b.alloc(t + 2 * i, 64, 0x30000000 + i * 256, 3);
        for (int i = 0; i < 4; ++i) b.free(t + 2 * i + 1, 0x30000000 + i * 256);
        if (fast_bytes) {
            b.alloc(t + 10, fast_bytes, fast_addr, 1);
            fast_addr += fast_bytes + 16;
        }
        b.alloc(t + 12, slow_bytes, slow_addr, 2);
        slow_addr += slow_bytes + 16;
        if (r % 100 == 99) b.end_block();
        last = t + 20;
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

bool is_finding(const AnalysisResult& r, uint64_t stack) {
    for (const GroupReport& g : r.findings)
        if (g.stack_ids == std::vector<uint64_t>{stack}) return true;
    return false;
}

TEST(Significance, AFastGrowerIsAFindingHoweverSmallItsShare) {
    GrowthVerdict v;
    v.slope_bytes_per_s = 1000;  // 86 MB a day
    v.growth_bytes = 100000;
    const Significance s = judge_significance(v, 100e6);
    EXPECT_TRUE(s.significant) << s.reason;
    EXPECT_NEAR(s.projected_bytes_per_day, 86.4e6, 1);
    EXPECT_NEAR(s.heap_growth_share, 0.001, 1e-9);
}

TEST(Significance, ASlowGrowerThatIsMostOfTheHeapsGrowthIsAFinding) {
    GrowthVerdict v;
    v.slope_bytes_per_s = 10;  // under 1 MB a day
    v.growth_bytes = 70000;
    EXPECT_TRUE(judge_significance(v, 100000).significant);
    // The heap did not grow at all (others shrank): the group is all of its growth.
    EXPECT_DOUBLE_EQ(judge_significance(v, 0).heap_growth_share, 1.0);
}

TEST(Significance, ASlowSmallShareIsMinorAndSaysWhy) {
    GrowthVerdict v;
    v.slope_bytes_per_s = 100;  // 8.6 MB a day
    v.growth_bytes = 200000;
    const Significance s = judge_significance(v, 20e6);
    EXPECT_FALSE(s.significant);
    EXPECT_NE(s.reason.find("minor"), std::string::npos) << s.reason;
    EXPECT_NE(s.reason.find("1% of the heap's growth"), std::string::npos) << s.reason;
}

// 2,000 s of a service: one grower keeps 10 KB a request (20 MB, 864 MB a day), another 100
// bytes (200 KB, 8.6 MB a day, 1 % of the heap's growth). Both grow without bound; only the
// first is a finding, the second is listed with its reason.
TEST(Significance, ATrickleBesideALargeGrowerIsListedNotReported) {
    const AnalysisResult r = analyze_trace(write_two_growers("trickle", 2000, 10000, 100));
    const GroupReport* fast = group_of_stack(r, 1);
    const GroupReport* slow = group_of_stack(r, 2);
    ASSERT_NE(fast, nullptr);
    ASSERT_NE(slow, nullptr);
    EXPECT_EQ(fast->verdict.cls, GrowthClass::Unbounded) << fast->verdict.reason;
    EXPECT_EQ(slow->verdict.cls, GrowthClass::Unbounded) << slow->verdict.reason;
    EXPECT_TRUE(is_finding(r, 1));
    EXPECT_FALSE(is_finding(r, 2)) << slow->significance.reason;
    EXPECT_NEAR(slow->significance.projected_bytes_per_day, 100.0 * 86400, 100.0 * 86400 * 0.05);
    EXPECT_NEAR(slow->significance.heap_growth_share, 100.0 / 10100, 0.002);
    EXPECT_GT(fast->significance.heap_growth_share, 0.95);
}

// The same trickle alone is all the heap gains: a finding.
TEST(Significance, TheSameTrickleAloneIsReported) {
    const AnalysisResult r = analyze_trace(write_two_growers("trickle_alone", 2000, 0, 100));
    EXPECT_TRUE(is_finding(r, 2));
    ASSERT_FALSE(r.findings.empty());
    EXPECT_GT(r.findings.front().significance.heap_growth_share, 0.95);
}

}  // namespace
}  // namespace growtrace
