// The sampler of sampled mode (preload/record/sampler.h), through the very functions the hooks call:
// its sample points are a Poisson process over the bytes a thread allocates, so the weighted
// samples estimate allocation counts and bytes without bias whatever the mix of sizes; the
// set of live samples never lets the free hook miss one; a Python hook's bytes are counted once;
// full mode records everything and touches nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "format/sampling.h"
#include "preload/record/sampler.h"

namespace growtrace::preload {
namespace {

// What a hook decides for an allocation of `size` bytes: recorded or not.
bool hook_records(size_t size) { return !sample_skip(size) && sample_take(size); }

class SamplerTest : public ::testing::Test {
protected:
    void TearDown() override {
        sampler_configure(0);
        t_sample_countdown = 0;
    }
};

TEST_F(SamplerTest, LogarithmWithoutLibmIsAccurate) {
    for (double x : {1.0, 0.999999, 0.75, 0.5, 0.3678794411714423, 0.1, 1e-3, 1e-9, 0x1.0p-53}) {
        SCOPED_TRACE(x);
        EXPECT_NEAR(sample_log_for_tests(x), std::log(x), 1e-12 * std::max(1.0, std::fabs(std::log(x))));
    }
}

// Distances between sample points are exponential: P(distance <= s) = 1 - exp(-s/period).
TEST_F(SamplerTest, DistancesFollowTheExponentialLaw) {
    constexpr uint64_t kPeriod = 512 * 1024;
    constexpr int kDraws = 200000;
    uint64_t state = 0x1234567;
    std::vector<uint64_t> d(kDraws);
    double sum = 0;
    for (uint64_t& x : d) {
        x = sample_draw_distance(kPeriod, state);
        ASSERT_GE(x, 1u);
        sum += static_cast<double>(x);
    }
    EXPECT_NEAR(sum / kDraws / kPeriod, 1.0, 4 / std::sqrt(double{kDraws}));
    for (double s : {0.01, 0.1, 0.5, 1.0, 2.0, 5.0}) {
        const auto below = std::count_if(d.begin(), d.end(), [&](uint64_t x) { return x <= s * kPeriod; });
        const double p = 1 - std::exp(-s);
        EXPECT_NEAR(static_cast<double>(below) / kDraws, p, 4 * std::sqrt(p * (1 - p) / kDraws)) << s;
    }
}

// The hooks' decisions, weighted as the analyzer weighs them, estimate the true number of
// allocations and bytes without bias: over many independent runs of one program (sizes from
// 1 byte to 4 MiB, most small, as real heaps are) the mean estimate is the truth within its
// standard error, and each run's error is of the size the analyzer reports.
TEST_F(SamplerTest, WeightedSamplesAreUnbiasedEstimatesOfCountsAndBytes) {
    constexpr uint64_t kPeriod = 64 * 1024;
    ASSERT_TRUE(sampler_configure(kPeriod));
    std::mt19937_64 program(42);
    std::vector<size_t> sizes;
    double true_bytes = 0;
    for (int i = 0; i < 20000; ++i) {
        const int kind = static_cast<int>(program() % 100);
        size_t size = kind < 80 ? 1 + program() % 256 : kind < 97 ? 256 + program() % 65536 : 65536 + program() % (4 << 20);
        sizes.push_back(size);
        true_bytes += static_cast<double>(size);
    }
    const double true_count = static_cast<double>(sizes.size());
    constexpr int kRuns = 400;
    double mean_bytes = 0, mean_count = 0, z_squares = 0;
    for (int run = 0; run < kRuns; ++run) {
        t_sample_countdown = 0;  // a new thread: its first draw comes with its first allocation
        double bytes = 0, count = 0, variance = 0;
        for (size_t size : sizes) {
            if (!hook_records(size)) continue;
            const format::SampleWeight w = format::sample_weight(size, kPeriod);
            bytes += w.bytes;
            count += w.count;
            variance += w.variance;
        }
        mean_bytes += bytes / kRuns;
        mean_count += count / kRuns;
        z_squares += (bytes - true_bytes) * (bytes - true_bytes) / variance;
    }
    // Relative standard error of one run's byte estimate is about sqrt(period / mean size of a
    // byte's block); of the mean over kRuns, that over sqrt(kRuns).
    EXPECT_NEAR(mean_bytes / true_bytes, 1.0, 0.02);
    EXPECT_NEAR(mean_count / true_count, 1.0, 0.05);
    // The variance the analyzer reports matches the spread of the estimates: mean z^2 ~ 1.
    EXPECT_NEAR(z_squares / kRuns, 1.0, 0.35);
}

// Each allocation is recorded with probability 1 - exp(-size/period), whatever came before it
// in the thread: measured for three sizes mixed in one stream.
TEST_F(SamplerTest, EachSizeIsSampledWithItsProbability) {
    constexpr uint64_t kPeriod = 4096;
    ASSERT_TRUE(sampler_configure(kPeriod));
    const size_t kSizes[] = {16, 1000, 20000};
    uint64_t seen[3] = {}, taken[3] = {};
    std::mt19937_64 rng(7);
    for (int i = 0; i < 300000; ++i) {
        const int k = static_cast<int>(rng() % 3);
        ++seen[k];
        taken[k] += hook_records(kSizes[k]);
    }
    for (int k = 0; k < 3; ++k) {
        const double p = format::sample_probability(kSizes[k], kPeriod);
        const double got = static_cast<double>(taken[k]) / static_cast<double>(seen[k]);
        EXPECT_NEAR(got, p, 5 * std::sqrt(p * (1 - p) / static_cast<double>(seen[k])) + 1e-9) << kSizes[k];
    }
}

TEST_F(SamplerTest, FullModeRecordsEveryAllocationAndTouchesNothing) {
    ASSERT_TRUE(sampler_configure(0));
    t_sample_countdown = 0;
    for (size_t size : {0u, 1u, 100u, 1u << 20}) {
        EXPECT_FALSE(sample_skip(size));
        EXPECT_TRUE(sample_take(size));
    }
    EXPECT_EQ(t_sample_countdown, 0u) << "full mode leaves the countdown at 0, so the hooks' first test fails";
    EXPECT_TRUE(sample_maybe_live(reinterpret_cast<void*>(0x1000))) << "every free is recorded";
    {
        PythonAllocationSample sample(100);
        EXPECT_TRUE(static_cast<bool>(sample));
        EXPECT_EQ(t_sample_countdown, 0u);
    }
    // A countdown left over from an earlier sampled trace (attach) cannot skip anything.
    t_sample_countdown = 1 << 20;
    EXPECT_FALSE(sample_skip(100));
}

// A block of no bytes holds no sample point: never recorded, so a size-0 record of a sampled
// trace can mean "followed for its free only".
TEST_F(SamplerTest, EmptyBlocksAreNeverSamples) {
    ASSERT_TRUE(sampler_configure(16));
    t_sample_countdown = 0;
    for (int i = 0; i < 100000; ++i) ASSERT_FALSE(hook_records(0));
}

// pymalloc hands blocks over 512 bytes to malloc: inside a Python hook, that inner malloc
// neither counts the bytes again nor samples them, and afterwards the thread's countdown is
// what counting the block once left.
TEST_F(SamplerTest, PythonHookCountsABlockOnce) {
    ASSERT_TRUE(sampler_configure(1 << 20));
    t_sample_countdown = 500000;
    {
        PythonAllocationSample sample(1000);
        EXPECT_FALSE(static_cast<bool>(sample));
        for (int i = 0; i < 1000; ++i) EXPECT_TRUE(sample_skip(1 << 20)) << "the inner malloc is never a sample";
    }
    EXPECT_EQ(t_sample_countdown, 499000u);
    t_sample_countdown = 10;
    {
        PythonAllocationSample sample(1000);
        EXPECT_TRUE(static_cast<bool>(sample)) << "a sample point falls inside";
        EXPECT_TRUE(sample_skip(600));
    }
    EXPECT_GE(t_sample_countdown, 1u) << "drawn again from the block's end";
}

// The filter starts at 16 KiB (it is read by every free) and grows fourfold once the live
// samples would make more than 1 free in 32 a false hit; samples inserted before, during and
// after each growth are all still found, and frees of other blocks mostly ruled out.
TEST_F(SamplerTest, FilterGrowsWithTheLiveSamplesAndKeepsThemAll) {
    ASSERT_TRUE(sampler_configure(512 * 1024));
    const unsigned first_log2 = sample_filter_log2();  // a grown filter is kept for a later trace
    EXPECT_GE(first_log2, kSampleFilterMinLog2);
    std::mt19937_64 rng(11);
    std::vector<uint64_t> live;
    unsigned last_log2 = sample_filter_log2();
    int growths = 0;
    while (live.size() < 20000) {
        uint64_t addr = (rng() & 0x7fffffffff0ull) | 0x20;
        if (!live_samples_contains(addr)) {
            ASSERT_TRUE(live_samples_insert(addr));
            live.push_back(addr);
        }
        if (sample_filter_log2() != last_log2) {
            ++growths;
            last_log2 = sample_filter_log2();
            EXPECT_GE(live.size(), (size_t{1} << (last_log2 - 2)) / 32) << "grew too early";
            for (uint64_t a : live) ASSERT_TRUE(sample_maybe_live(reinterpret_cast<void*>(a)));
        }
    }
    EXPECT_GE(sample_filter_log2(), 20u) << "20,000 live samples need 1 MiB of counters";
    if (first_log2 == kSampleFilterMinLog2) {
        EXPECT_EQ(growths, 3) << "16 KiB -> 64 KiB -> 256 KiB -> 1 MiB";
    }
    for (uint64_t a : live) ASSERT_TRUE(sample_maybe_live(reinterpret_cast<void*>(a)));
    int false_hits = 0;
    for (int i = 0; i < 100000; ++i) false_hits += sample_maybe_live(reinterpret_cast<void*>((rng() & 0x7fffffffff0ull) | 0x8));
    EXPECT_LT(false_hits, 100000 / 32 + 1000);
    // Full mode again: no filter.
    ASSERT_TRUE(sampler_configure(0));
    EXPECT_TRUE(sample_maybe_live(reinterpret_cast<void*>(0x1234)));
}

// The free hook asks sample_maybe_live first: it must never say no for a live sample, also
// once many samples share a filter bucket (counters saturate and stay), and the exact table
// then tells them apart.
TEST_F(SamplerTest, FilterNeverMissesALiveSample) {
    ASSERT_TRUE(sampler_configure(512 * 1024));
    std::mt19937_64 rng(3);
    std::set<uint64_t> live;
    for (int i = 0; i < 50000; ++i) {
        uint64_t addr = (rng() & 0x7fffffffff0ull) | 0x10;
        if (live.insert(addr).second) {
            ASSERT_TRUE(live_samples_insert(addr));
        }
    }
    EXPECT_EQ(sample_filter_log2(), kSampleFilterMaxLog2) << "50,000 live samples: the filter grew to its largest";
    // 300 samples in one bucket: its counter saturates.
    const unsigned log2 = sample_filter_log2();
    const size_t bucket = sample_filter_bucket(0x5550000);
    ASSERT_EQ(bucket, sample_filter_index(0x5550000, log2));
    std::vector<uint64_t> same;
    for (uint64_t page = 1; same.size() < 300; ++page) {  // pages whose counters share the line
        const uint64_t a = (page << 12) | (0x5550000 & 0x3f0);
        for (uint64_t alias = 0; alias < 4096; alias += 1024)
            if (sample_filter_index(a + alias, log2) == bucket && !live.count(a + alias)) same.push_back(a + alias);
    }
    for (uint64_t a : same) {
        ASSERT_TRUE(live_samples_insert(a));
        live.insert(a);
    }
    EXPECT_EQ(live_samples_count(), live.size());
    // Its counter stays saturated: removing all but the last of them leaves that one found.
    for (size_t i = 0; i + 1 < same.size(); ++i) {
        ASSERT_TRUE(live_samples_remove(same[i]));
        live.erase(same[i]);
    }
    ASSERT_TRUE(sample_maybe_live(reinterpret_cast<void*>(same.back())));
    EXPECT_TRUE(live_samples_insert(*live.begin())) << "inserting a live sample again is harmless";
    EXPECT_EQ(live_samples_count(), live.size());
    // Remove every other one; the rest must still be found, the removed ones not.
    int k = 0;
    for (auto it = live.begin(); it != live.end();) {
        if (k++ % 2) {
            ASSERT_TRUE(live_samples_remove(*it));
            EXPECT_FALSE(live_samples_contains(*it));
            it = live.erase(it);
        } else {
            ++it;
        }
    }
    for (uint64_t a : live) {
        ASSERT_TRUE(sample_maybe_live(reinterpret_cast<void*>(a))) << std::hex << a;
        ASSERT_TRUE(live_samples_contains(a));
    }
    // Most addresses that were never samples are ruled out by the filter alone.
    int ruled_out = 0;
    for (int i = 0; i < 10000; ++i) ruled_out += !sample_maybe_live(reinterpret_cast<void*>((rng() & 0x7fffffffff0ull) | 0x8));
    EXPECT_GT(ruled_out, 8000);
    for (uint64_t a : live) ASSERT_TRUE(live_samples_remove(a));
    EXPECT_EQ(live_samples_count(), 0u);
    EXPECT_FALSE(live_samples_remove(0x5550000));
}

// Threads inserting and removing their own samples at once: each sees its live ones every time.
TEST_F(SamplerTest, FilterNeverMissesUnderConcurrentThreads) {
    ASSERT_TRUE(sampler_configure(512 * 1024));
    std::atomic<int> misses{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([t, &misses] {
            std::mt19937_64 rng(100 + t);
            std::vector<uint64_t> mine;
            for (int i = 0; i < 40000; ++i) {
                if (mine.size() < 2000 && rng() % 2) {
                    uint64_t addr = ((rng() & 0xffffffff0ull) << 4) | (uint64_t(t + 1) << 48);
                    if (live_samples_insert(addr)) mine.push_back(addr);
                } else if (!mine.empty()) {
                    size_t i_rm = rng() % mine.size();
                    if (!live_samples_remove(mine[i_rm])) ++misses;
                    mine[i_rm] = mine.back();
                    mine.pop_back();
                }
                for (int probe = 0; probe < 3 && !mine.empty(); ++probe)
                    if (!sample_maybe_live(reinterpret_cast<void*>(mine[rng() % mine.size()]))) ++misses;
            }
            for (uint64_t a : mine) live_samples_remove(a);
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(misses.load(), 0);
    EXPECT_EQ(live_samples_count(), 0u);
}

TEST_F(SamplerTest, ForkedChildForgetsItsParentsSamples) {
    ASSERT_TRUE(sampler_configure(512 * 1024));
    ASSERT_TRUE(live_samples_insert(0x1230));
    sampler_prepare_fork();
    sampler_child_after_fork();  // what the child runs (here in the same process)
    EXPECT_FALSE(live_samples_contains(0x1230));
    EXPECT_FALSE(sample_maybe_live(reinterpret_cast<void*>(0x1230)));
    EXPECT_TRUE(live_samples_insert(0x4560)) << "the lock was released";
}

}  // namespace
}  // namespace growtrace::preload
