// LiveBySequence: the young ring and the map of older allocations behave as one exact map,
// whatever the ages at which allocations die, and whatever gaps the sequence numbers jump.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "analyzer/model/live_by_sequence.h"

namespace growtrace {
namespace {

using Live = LiveBySequence<uint64_t>;

std::map<uint64_t, uint64_t> contents(const Live& live) {
    std::map<uint64_t, uint64_t> out;
    live.for_each([&](uint64_t seq, uint64_t value) { EXPECT_TRUE(out.emplace(seq, value).second) << seq; });
    return out;
}

TEST(LiveBySequence, AnAllocationOlderThanTheRingIsStillFoundAndTakenOnce) {
    Live live(2);  // a ring of 4
    for (uint64_t seq = 1; seq <= 10; ++seq) live.insert(seq, seq * 10);
    uint64_t v = 0;
    ASSERT_TRUE(live.take(1, v));  // moved to the map long ago
    EXPECT_EQ(v, 10u);
    EXPECT_FALSE(live.take(1, v));
    ASSERT_TRUE(live.take(10, v));  // still in the ring
    EXPECT_EQ(v, 100u);
    EXPECT_FALSE(live.take(10, v));
    ASSERT_NE(live.find(7), nullptr);
    EXPECT_EQ(*live.find(7), 70u);
    EXPECT_EQ(live.find(11), nullptr);
    EXPECT_EQ(contents(live).size(), 8u);
}

TEST(LiveBySequence, AJumpWiderThanTheRingMovesEveryYoungAllocationToTheMap) {
    Live live(2);
    live.insert(1, 1);
    live.insert(3, 3);
    live.insert(4, 4);
    live.insert(1000, 5);
    EXPECT_EQ(contents(live), (std::map<uint64_t, uint64_t>{{1, 1}, {3, 3}, {4, 4}, {1000, 5}}));
    uint64_t v = 0;
    EXPECT_TRUE(live.take(3, v));
    EXPECT_EQ(v, 3u);
    EXPECT_FALSE(live.take(2, v));  // never allocated
}

TEST(LiveBySequence, SequenceNumberZeroFromACorruptTraceIsKeptLikeAnyOther) {
    Live live(2);
    live.insert(0, 7);
    live.insert(5, 8);
    uint64_t v = 0;
    EXPECT_EQ(contents(live).size(), 2u);
    EXPECT_TRUE(live.take(0, v));
    EXPECT_EQ(v, 7u);
}

TEST(LiveBySequence, MatchesAPlainMapOverRandomLifetimes) {
    // Lifetimes from a few allocations to many times the ring's size, as in a real trace.
    Live live(6);
    std::map<uint64_t, uint64_t> expected;
    std::mt19937_64 rng(42);
    std::geometric_distribution<uint64_t> age(0.01);
    std::multimap<uint64_t, uint64_t> deaths;  // due seq -> seq
    for (uint64_t seq = 1; seq <= 200000; ++seq) {
        live.insert(seq, seq ^ 0x5a5a);
        expected[seq] = seq ^ 0x5a5a;
        deaths.emplace(seq + age(rng), seq);
        for (auto it = deaths.begin(); it != deaths.end() && it->first <= seq; it = deaths.erase(it)) {
            if (rng() % 50 == 0) continue;  // some live to the end
            uint64_t v = 0;
            ASSERT_TRUE(live.take(it->second, v)) << it->second;
            EXPECT_EQ(v, expected[it->second]);
            expected.erase(it->second);
        }
    }
    EXPECT_EQ(contents(live), expected);
    live.clear();
    EXPECT_TRUE(contents(live).empty());
}

}  // namespace
}  // namespace growtrace
