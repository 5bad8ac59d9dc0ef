// Retention model: exact totals whatever the delivery order of threads' runs, frees of memory
// allocated before tracing, and bounded windows.
#include <gtest/gtest.h>

#include <cmath>

#include <map>
#include <random>

#include "analyzer/model/retention.h"

namespace growtrace {
namespace {

AllocEvent alloc(uint64_t tid, uint64_t ticks, uint64_t size, uint64_t addr, uint64_t stack) {
    return AllocEvent{tid, ticks, size, addr, stack};
}
FreeEvent free_(uint64_t tid, uint64_t ticks, uint64_t addr) { return FreeEvent{tid, ticks, addr}; }

const StackRetention* find_stack(const RetentionResult& r, uint64_t id) {
    for (const auto& s : r.stacks)
        if (s.stack_id == id) return &s;
    return nullptr;
}

TEST(AnalyzerRetention, ReusedAddressArrivingBeforeTheFreeIsMatchedByTicks) {
    // Thread A allocates X at 10 and frees it at 20; thread B gets X at 30. B's run reaches the
    // file before A's free.
    RetentionModel m;
    m.on_alloc(alloc(1, 10, 100, 0x1000, 1));
    m.on_alloc(alloc(2, 30, 200, 0x1000, 2));
    m.on_free(free_(1, 20, 0x1000));
    RetentionResult r = m.finish();
    EXPECT_EQ(r.totals.allocations, 2u);
    EXPECT_EQ(r.totals.frees, 1u);
    EXPECT_EQ(r.totals.matched_frees, 1u);
    EXPECT_EQ(r.totals.unmatched_frees, 0u);
    EXPECT_EQ(r.totals.retained_bytes, 200u);
    EXPECT_EQ(r.totals.live_allocations, 1u);
    EXPECT_EQ(find_stack(r, 1)->live_bytes, 0u);
    EXPECT_EQ(find_stack(r, 2)->live_bytes, 200u);
}

TEST(AnalyzerRetention, FreeArrivingBeforeItsAllocationIsKeptPending) {
    // Same history delivered as: A's free, B's alloc, A's alloc.
    RetentionModel m;
    m.on_free(free_(1, 20, 0x1000));
    m.on_alloc(alloc(2, 30, 200, 0x1000, 2));
    m.on_alloc(alloc(1, 10, 100, 0x1000, 1));
    RetentionResult r = m.finish();
    EXPECT_EQ(r.totals.matched_frees, 1u);
    EXPECT_EQ(r.totals.unmatched_frees, 0u);
    EXPECT_EQ(r.totals.retained_bytes, 200u);
    EXPECT_EQ(find_stack(r, 1)->live_bytes, 0u);
    EXPECT_EQ(find_stack(r, 2)->live_count, 1u);
}

TEST(AnalyzerRetention, EveryDeliveryOrderOfThreeRunsGivesTheSameResult) {
    // Runs: A = alloc X@10, free X@20; B = alloc X@30, free Y@35; C = alloc Y@5, free X@40, alloc X@50.
    std::vector<std::vector<std::pair<bool, AllocEvent>>> runs = {
        {{true, alloc(1, 10, 100, 0x10, 1)}, {false, AllocEvent{1, 20, 0, 0x10, 0}}},
        {{true, alloc(2, 30, 200, 0x10, 2)}, {false, AllocEvent{2, 35, 0, 0x20, 0}}},
        {{true, alloc(3, 5, 7, 0x20, 3)}, {false, AllocEvent{3, 40, 0, 0x10, 0}}, {true, alloc(3, 50, 300, 0x10, 3)}},
    };
    std::vector<int> order = {0, 1, 2};
    do {
        RetentionModel m;
        for (int i : order)
            for (auto& [is_alloc, e] : runs[i]) {
                if (is_alloc) m.on_alloc(e);
                else m.on_free(free_(e.tid, e.ticks, e.addr));
            }
        RetentionResult r = m.finish();
        EXPECT_EQ(r.totals.retained_bytes, 300u);
        EXPECT_EQ(r.totals.matched_frees, 3u);
        EXPECT_EQ(r.totals.unmatched_frees, 0u);
        EXPECT_EQ(find_stack(r, 3)->live_bytes, 300u);
        EXPECT_EQ(find_stack(r, 2)->live_bytes, 0u);
    } while (std::next_permutation(order.begin(), order.end()));
}

TEST(AnalyzerRetention, RandomHistoriesDeliveredInRandomChunkOrderAreExact) {
    // Four threads allocate and free from a shared pool of addresses (so addresses move between
    // threads); each thread's events are cut into runs and the runs are delivered in random
    // order, keeping each thread's own order. Live bytes per stack must equal the truth.
    for (unsigned seed = 1; seed <= 200; ++seed) {
        std::mt19937 rng(seed);
        struct Ev { bool is_alloc; AllocEvent e; };
        std::vector<std::vector<Ev>> logs(4);
        std::map<uint64_t, std::pair<uint64_t, uint64_t>> live;  // addr -> (size, stack)
        std::vector<uint64_t> pool;
        for (uint64_t a = 0; a < 64; ++a) pool.push_back(0x1000 + a * 16);
        for (uint64_t t = 1; t <= 300; ++t) {
            const uint64_t tid = rng() % 4;
            const bool do_alloc = live.empty() || (!pool.empty() && rng() % 2);
            if (do_alloc) {
                const size_t i = rng() % pool.size();
                const uint64_t addr = pool[i];
                pool.erase(pool.begin() + i);
                const uint64_t size = 1 + rng() % 100, stack = 1 + rng() % 3;
                live[addr] = {size, stack};
                logs[tid].push_back({true, alloc(tid, t, size, addr, stack)});
            } else {
                auto it = std::next(live.begin(), rng() % live.size());
                logs[tid].push_back({false, AllocEvent{tid, t, 0, it->first, 0}});
                pool.push_back(it->first);
                live.erase(it);
            }
        }
        RetentionModel m;
        std::vector<size_t> pos(4, 0);
        while (true) {
            std::vector<uint64_t> ready;
            for (uint64_t tid = 0; tid < 4; ++tid)
                if (pos[tid] < logs[tid].size()) ready.push_back(tid);
            if (ready.empty()) break;
            const uint64_t tid = ready[rng() % ready.size()];
            const size_t run = 1 + rng() % 6;
            for (size_t k = 0; k < run && pos[tid] < logs[tid].size(); ++k, ++pos[tid]) {
                const Ev& ev = logs[tid][pos[tid]];
                if (ev.is_alloc) m.on_alloc(ev.e);
                else m.on_free(free_(ev.e.tid, ev.e.ticks, ev.e.addr));
            }
        }
        RetentionResult r = m.finish();
        std::map<uint64_t, uint64_t> truth;
        uint64_t truth_total = 0;
        for (auto& [addr, v] : live) {
            truth[v.second] += v.first;
            truth_total += v.first;
        }
        ASSERT_EQ(r.totals.retained_bytes, truth_total) << "seed " << seed;
        ASSERT_EQ(r.totals.unmatched_frees, 0u) << "seed " << seed;
        ASSERT_EQ(r.totals.untraced_reuses, 0u) << "seed " << seed;
        for (const auto& s : r.stacks) ASSERT_EQ(s.live_bytes, truth[s.stack_id]) << "seed " << seed;
    }
}

TEST(AnalyzerRetention, CompactEventsAreMatchedBySequenceNumber) {
    RetentionModel m;
    m.on_alloc_compact(AllocCompactEvent{1, 10, 100, 1, 1});
    m.on_alloc_compact(AllocCompactEvent{2, 11, 200, 2, 2});
    m.on_free_compact(FreeCompactEvent{2, 20, 1});
    m.on_free_compact(FreeCompactEvent{2, 21, 1});  // corrupt: freed twice, counted once
    RetentionResult r = m.finish();
    EXPECT_EQ(r.totals.retained_bytes, 200u);
    EXPECT_EQ(r.totals.matched_frees, 1u);
    EXPECT_EQ(r.totals.unmatched_frees, 1u);
    EXPECT_EQ(find_stack(r, 1)->live_bytes, 0u);
    EXPECT_EQ(find_stack(r, 2)->live_count, 1u);
}

// Samples the writer counted (ShortLivedSamples) are the births and deaths their records gave:
// the same samples as pairs of compact events, each born and dead within one window, and as
// counts at the start of their intervals give the same figures per stack, window and in all.
TEST(AnalyzerRetention, CountedShortLivedSamplesAreTheirPairs) {
    // Intervals of 64 ticks, 300 of them: as the writer picks them, the narrowest that 512
    // windows over the whole span can be.
    constexpr uint64_t kPeriod = 4096, kShift = 6;
    RetentionModel pairs, counts;
    for (RetentionModel* m : {&pairs, &counts}) {
        m->set_origin(1000);
        m->set_sample_period(kPeriod);
    }
    ShortLivedSamplesRecord record;
    record.shift = kShift;
    uint64_t seq = 0;
    std::mt19937_64 random(7);
    for (uint64_t interval = 0; interval < 300; ++interval) {
        const uint64_t start = 1000 + (interval << kShift);
        for (uint64_t stack : {1, 2, 3}) {
            const uint64_t size = 16 + 1000 * stack, n = 1 + random() % 4;
            for (uint64_t i = 0; i < n; ++i) {
                const uint64_t born = start + random() % 32, dead = born + random() % 32;
                pairs.on_alloc_compact(AllocCompactEvent{stack, born, size, stack, ++seq});
                pairs.on_free_compact(FreeCompactEvent{stack, dead, seq});
                record.last_ticks = std::max(record.last_ticks, dead);
            }
            record.groups.push_back(ShortLivedGroup{start, stack, size, n});
        }
        // A block that stays, to have a level.
        pairs.on_alloc_compact(AllocCompactEvent{9, start + 1, 50000, 4, ++seq});
        counts.on_alloc_compact(AllocCompactEvent{9, start + 1, 50000, 4, seq});
    }
    counts.on_short_lived(record);
    const RetentionResult a = pairs.finish(), b = counts.finish();
    EXPECT_EQ(a.shift, b.shift);
    ASSERT_GE(a.shift, kShift) << "windows at least as wide as the intervals";
    EXPECT_EQ(a.num_windows, b.num_windows);
    auto near = [](double x, double y) { return std::abs(x - y) <= 1e-9 * std::max({1.0, std::abs(x), std::abs(y)}); };
    for (uint64_t id : {1, 2, 3, 4}) {
        const StackRetention *x = find_stack(a, id), *y = find_stack(b, id);
        ASSERT_TRUE(x && y) << id;
        EXPECT_TRUE(near(x->allocations, y->allocations)) << id;
        EXPECT_TRUE(near(x->allocated_bytes, y->allocated_bytes)) << id;
        EXPECT_EQ(x->samples, y->samples) << id;
        EXPECT_EQ(x->live_samples, y->live_samples) << id;
        ASSERT_EQ(x->bins.size(), y->bins.size()) << id;
        for (size_t i = 0; i < x->bins.size(); ++i) {
            EXPECT_EQ(x->bins[i].window, y->bins[i].window);
            EXPECT_TRUE(near(x->bins[i].births_bytes, y->bins[i].births_bytes));
            EXPECT_TRUE(near(x->bins[i].deaths_bytes, y->bins[i].deaths_bytes));
            EXPECT_TRUE(near(x->bins[i].births, y->bins[i].births));
            EXPECT_EQ(x->bins[i].death_samples, y->bins[i].death_samples);
        }
    }
    EXPECT_GT(find_stack(a, 1)->samples, 300u);
    ASSERT_EQ(a.heap.size(), b.heap.size());
    for (size_t w = 0; w < a.heap.size(); ++w) EXPECT_TRUE(near(a.heap[w].births_bytes, b.heap[w].births_bytes));
    EXPECT_TRUE(near(a.totals.allocations, b.totals.allocations));
    EXPECT_TRUE(near(a.totals.frees, b.totals.frees));
    EXPECT_TRUE(near(a.totals.peak_bytes, b.totals.peak_bytes));
    EXPECT_EQ(a.totals.samples, b.totals.samples);
    EXPECT_EQ(a.totals.matched_frees, b.totals.matched_frees);
}

// Frees inside a full collection are garbage: dead since the full collection before (what it
// left was reachable), or since their birth if they were born after it.
TEST(AnalyzerRetention, GarbageFreedByAFullCollectionIsDeadSinceThePreviousOne) {
    RetentionModel m;
    m.set_origin(0);
    // Windows are 1 tick wide while everything fits in 512 of them.
    m.on_alloc_compact(AllocCompactEvent{1, 10, 100, 1, 1});   // survives the collection at 100
    m.on_alloc_compact(AllocCompactEvent{1, 150, 200, 1, 2});  // born after it
    m.on_alloc_compact(AllocCompactEvent{1, 160, 400, 2, 3});  // freed by the program itself
    m.on_free_compact(FreeCompactEvent{1, 170, 3});
    EXPECT_EQ(m.on_garbage_free_compact(FreeCompactEvent{1, 300, 1}, 100), 100u);
    EXPECT_EQ(m.on_garbage_free_compact(FreeCompactEvent{1, 300, 2}, 100), 150u);
    EXPECT_EQ(m.on_garbage_free_compact(FreeCompactEvent{1, 300, 9}, 100), 0u) << "unknown allocation";
    RetentionResult r = m.finish();
    EXPECT_EQ(r.totals.garbage_frees, 2);
    EXPECT_EQ(r.totals.garbage_bytes, 300);
    EXPECT_EQ(r.totals.retained_bytes, 0u);
    const StackRetention* s = find_stack(r, 1);
    ASSERT_TRUE(s);
    double level = 0, level_at_200 = -1;
    for (const WindowBin& b : s->bins) {
        level += b.births_bytes - b.deaths_bytes;
        EXPECT_NE(b.window, 300u) << "no death counted when the collection ran";
        if (b.window <= 200) level_at_200 = level;
    }
    EXPECT_EQ(level_at_200, 0) << "garbage between two full collections is not held";
    EXPECT_EQ(find_stack(r, 2)->bins.back().window, 170u);
}

TEST(AnalyzerRetention, FreeOfMemoryAllocatedBeforeTracingIsIgnored) {
    RetentionModel m;
    m.on_free(free_(1, 5, 0x5000));
    m.on_alloc(alloc(1, 10, 64, 0x6000, 1));
    RetentionResult r = m.finish();
    EXPECT_EQ(r.totals.unmatched_frees, 1u);
    EXPECT_EQ(r.totals.retained_bytes, 64u);
    EXPECT_EQ(r.totals.peak_bytes, 64u);
}

TEST(AnalyzerRetention, WindowsStayBoundedAndCountsSurvive) {
    RetentionModel m(1000);
    uint64_t live = 0;
    for (uint64_t i = 0; i < 100000; ++i) {
        m.on_alloc(alloc(1, 1000 + i * 37, 10, 0x100000 + 16 * i, 1 + i % 3));
        if (i % 2) m.on_free(free_(1, 1000 + i * 37 + 5, 0x100000 + 16 * i));
        else live += 10;
    }
    RetentionResult r = m.finish();
    EXPECT_LE(r.num_windows, RetentionModel::kMaxWindows);
    EXPECT_GE(r.num_windows, RetentionModel::kMaxWindows / 2);
    EXPECT_EQ(r.totals.retained_bytes, live);
    uint64_t births = 0, survivors = 0;
    for (const auto& s : r.stacks) {
        EXPECT_LE(s.bins.size(), r.num_windows);
        for (const auto& b : s.bins) births += b.births;
        for (const auto& b : s.survivors) survivors += b.bytes;
    }
    EXPECT_EQ(births, 100000u);
    EXPECT_EQ(survivors, live);
    const uint32_t windows_before = r.num_windows;
    r.coarsen(2);
    EXPECT_EQ(r.num_windows, ((windows_before - 1) >> 2) + 1);
    EXPECT_EQ(r.heap.size(), r.num_windows);
}

}  // namespace
}  // namespace growtrace

namespace growtrace {
namespace {

// The whole-heap curve must follow the events across window widenings: a bin added while the
// dense vector grew once claimed window 0, piling early growth into the first window.
TEST(AnalyzerRetention, HeapCurveFollowsSteadyGrowthAcrossWindowWidening) {
    RetentionModel m;
    constexpr uint64_t kEvents = 4000;
    for (uint64_t i = 0; i < kEvents; ++i) m.on_alloc_compact(AllocCompactEvent{1, i * 1000, 100, 1, i + 1});
    RetentionResult r = m.finish();
    ASSERT_GT(r.num_windows, 8u);
    int64_t level = 0, previous = -1;
    for (uint32_t w = 0; w < r.num_windows; ++w) {
        EXPECT_EQ(r.heap[w].window, w);
        level += static_cast<int64_t>(r.heap[w].births_bytes) - static_cast<int64_t>(r.heap[w].deaths_bytes);
        if (w + 1 < r.num_windows) {
            EXPECT_LT(level, 100 * static_cast<int64_t>(kEvents)) << "window " << w;
        }
        EXPECT_GE(level, previous);
        previous = level;
    }
    EXPECT_EQ(level, 100 * static_cast<int64_t>(kEvents));
    // Growth is spread: the first window holds a small share, not nearly everything.
    EXPECT_LT(r.heap[0].births_bytes, 100 * kEvents / 4);
}

}  // namespace
}  // namespace growtrace
