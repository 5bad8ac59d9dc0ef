// Stack tree of the preload library: ids of (parent, ip) pairs are stable, dense from 1 and
// created once, a full table answers 0, reset() forgets everything; the per-thread memo gives
// the tree's answers and drops them when the tree is reset; concurrent threads agree on ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "preload/capture/stack_tree.h"

namespace growtrace::preload {
namespace {

struct Key {
    uint32_t parent;
    uint64_t ip;
};

class StackTreeLayouts : public ::testing::TestWithParam<StackTree::Layout> {};

// Distinct keys, several sharing an ip (different parents) and several sharing a parent.
std::vector<Key> make_keys(size_t count) {
    std::vector<Key> keys;
    keys.reserve(count);
    for (size_t i = 0; i < count; ++i)
        keys.push_back({static_cast<uint32_t>(i % 7), 0x400000 + (i / 7) * 16});
    return keys;
}

TEST_P(StackTreeLayouts, SamePairGetsSameIdAndIsCreatedOnlyTheFirstTime) {
    StackTree tree;
    ASSERT_TRUE(tree.init(10, {GetParam()}));
    bool created = false;
    uint32_t first = tree.intern(0, 0x401000, created);
    EXPECT_NE(first, 0u);
    EXPECT_TRUE(created);
    uint32_t again = tree.intern(0, 0x401000, created);
    EXPECT_EQ(again, first);
    EXPECT_FALSE(created);
    EXPECT_EQ(tree.node_count(), 1u);
}

// Huge and populated pages are advice the kernel may refuse; either way the table, and its
// reset (which maps fresh pages and must advise them again), behave as with small pages.
TEST(StackTree, WithHugePopulatedPagesInternsAndResetsTheSame) {
    StackTree tree;
    ASSERT_TRUE(tree.init(16, {StackTree::Layout::ByParent, true, true}));
    std::vector<uint32_t> ids;
    bool created = false;
    for (uint64_t ip = 0; ip < 1000; ++ip) ids.push_back(tree.intern(static_cast<uint32_t>(ip % 3), 0x400000 + ip, created));
    for (uint64_t ip = 0; ip < 1000; ++ip) {
        EXPECT_EQ(tree.intern(static_cast<uint32_t>(ip % 3), 0x400000 + ip, created), ids[ip]);
        EXPECT_FALSE(created);
    }
    tree.reset();
    EXPECT_EQ(tree.node_count(), 0u);
    EXPECT_EQ(tree.intern(2, 0x400002, created), 1u);
    EXPECT_TRUE(created);
}

TEST_P(StackTreeLayouts, SameIpUnderDifferentParentsGetsDifferentIds) {
    StackTree tree;
    ASSERT_TRUE(tree.init(10, {GetParam()}));
    bool created = false;
    uint32_t root = tree.intern(0, 0x500000, created);
    uint32_t a = tree.intern(0, 0x401000, created);
    EXPECT_TRUE(created);
    uint32_t b = tree.intern(root, 0x401000, created);
    EXPECT_TRUE(created);
    EXPECT_NE(a, b);
    // And the same parent with a different ip is yet another node.
    uint32_t c = tree.intern(root, 0x401008, created);
    EXPECT_TRUE(created);
    EXPECT_NE(c, a);
    EXPECT_NE(c, b);
    EXPECT_EQ(tree.node_count(), 4u);
}

TEST_P(StackTreeLayouts, IdsAreDenseFromOneInCreationOrder) {
    StackTree tree;
    ASSERT_TRUE(tree.init(12, {GetParam()}));
    std::vector<Key> keys = make_keys(500);
    for (size_t i = 0; i < keys.size(); ++i) {
        bool created = false;
        EXPECT_EQ(tree.intern(keys[i].parent, keys[i].ip, created), i + 1);
        EXPECT_TRUE(created);
        EXPECT_EQ(tree.node_count(), i + 1);
    }
    // Looking them up again creates nothing and finds the same ids.
    for (size_t i = 0; i < keys.size(); ++i) {
        bool created = true;
        EXPECT_EQ(tree.intern(keys[i].parent, keys[i].ip, created), i + 1);
        EXPECT_FALSE(created);
    }
    EXPECT_EQ(tree.node_count(), keys.size());
}

TEST_P(StackTreeLayouts, UninitialisedTreeReturnsZero) {
    StackTree tree;
    bool created = true;
    EXPECT_EQ(tree.intern(0, 0x401000, created), 0u);
    EXPECT_FALSE(created);
    EXPECT_EQ(tree.node_count(), 0u);
}

TEST_P(StackTreeLayouts, FullTableReturnsZeroButStillFindsExistingNodes) {
    StackTree tree;
    ASSERT_TRUE(tree.init(4, {GetParam()}));  // 16 slots, load kept below 3/4
    std::vector<Key> keys = make_keys(16);
    std::vector<uint32_t> ids;
    for (const Key& k : keys) {
        bool created = false;
        uint32_t id = tree.intern(k.parent, k.ip, created);
        if (id == 0) {
            EXPECT_FALSE(created);
            break;
        }
        EXPECT_TRUE(created);
        ids.push_back(id);
    }
    // The table stops short of 3/4 of its slots (ids start at 1, so 11 or 12 nodes fit).
    EXPECT_GE(ids.size(), 11u);
    EXPECT_LE(ids.size(), 12u);
    EXPECT_EQ(tree.node_count(), ids.size());

    // Every further new pair is refused, and nothing is counted for it.
    for (size_t i = ids.size(); i < keys.size(); ++i) {
        bool created = true;
        EXPECT_EQ(tree.intern(keys[i].parent, keys[i].ip, created), 0u);
        EXPECT_FALSE(created);
    }
    EXPECT_EQ(tree.node_count(), ids.size());

    // Nodes made before the table filled up are still found.
    for (size_t i = 0; i < ids.size(); ++i) {
        bool created = true;
        EXPECT_EQ(tree.intern(keys[i].parent, keys[i].ip, created), ids[i]);
        EXPECT_FALSE(created);
    }
}

TEST_P(StackTreeLayouts, ResetForgetsNodesAndChangesEpoch) {
    StackTree tree;
    ASSERT_TRUE(tree.init(10, {GetParam()}));
    bool created = false;
    tree.intern(0, 0x401000, created);
    tree.intern(0, 0x402000, created);
    uint32_t b = tree.intern(0, 0x403000, created);
    EXPECT_EQ(b, 3u);
    uint32_t epoch_before = tree.epoch();

    tree.reset();
    EXPECT_EQ(tree.node_count(), 0u);
    EXPECT_NE(tree.epoch(), epoch_before);

    // The last pair interned before is new again, and numbering restarts at 1.
    uint32_t again = tree.intern(0, 0x403000, created);
    EXPECT_TRUE(created);
    EXPECT_EQ(again, 1u);
    EXPECT_EQ(tree.node_count(), 1u);

    uint32_t epoch_after_first = tree.epoch();
    tree.reset();
    EXPECT_NE(tree.epoch(), epoch_after_first);
}

TEST(StackTreeMemo, ReturnsTheTreesIdsAndReportsCreatedOnlyOnce) {
    StackTree tree;
    ASSERT_TRUE(tree.init(12));
    auto memo = std::make_unique<StackTreeMemo<1024>>();
    bool created = false;

    uint32_t a = memo->intern(tree, 0, 0x401000, created);
    EXPECT_TRUE(created);
    EXPECT_EQ(a, 1u);
    uint32_t a2 = memo->intern(tree, 0, 0x401000, created);
    EXPECT_FALSE(created);
    EXPECT_EQ(a2, a);

    // A node created through the tree directly is known, not created, through the memo.
    uint32_t direct = tree.intern(a, 0x402000, created);
    ASSERT_TRUE(created);
    uint32_t via_memo = memo->intern(tree, a, 0x402000, created);
    EXPECT_FALSE(created);
    EXPECT_EQ(via_memo, direct);

    // And the other way round: the tree sees what the memo created.
    uint32_t b = memo->intern(tree, direct, 0x403000, created);
    EXPECT_TRUE(created);
    EXPECT_EQ(tree.intern(direct, 0x403000, created), b);
    EXPECT_FALSE(created);
    EXPECT_EQ(tree.node_count(), 3u);
}

TEST(StackTreeMemo, AgreesWithTreeForMoreKeysThanItHolds) {
    // Twice as many pairs sharing one ip as the memo has entries, and as many sharing one
    // parent: some must meet in a memo entry, and each lookup there must still tell them apart.
    StackTree tree;
    ASSERT_TRUE(tree.init(14));
    auto memo = std::make_unique<StackTreeMemo<1024>>();
    std::vector<Key> keys;
    for (uint32_t parent = 1; parent <= 2048; ++parent) keys.push_back({parent, 0x401000});
    for (uint64_t i = 1; i <= 2048; ++i) keys.push_back({7, 0x500000 + i * 16});
    std::vector<uint32_t> ids;
    for (const Key& k : keys) {
        bool created = false;
        ids.push_back(memo->intern(tree, k.parent, k.ip, created));
        EXPECT_TRUE(created);
    }
    for (int round = 0; round < 2; ++round) {
        for (size_t i = 0; i < keys.size(); ++i) {
            bool created = true;
            ASSERT_EQ(memo->intern(tree, keys[i].parent, keys[i].ip, created), ids[i]) << "key " << i;
            EXPECT_FALSE(created);
        }
    }
    EXPECT_EQ(tree.node_count(), keys.size());
}

TEST(StackTreeMemo, GivesNoStaleIdsAfterTreeReset) {
    StackTree tree;
    ASSERT_TRUE(tree.init(10));
    auto memo = std::make_unique<StackTreeMemo<1024>>();
    bool created = false;
    uint32_t a = memo->intern(tree, 0, 0xa000, created);  // 1
    uint32_t b = memo->intern(tree, 0, 0xb000, created);  // 2
    ASSERT_EQ(a, 1u);
    ASSERT_EQ(b, 2u);

    tree.reset();
    // After the reset the new tree numbers b first, so the memo's old answers are both wrong.
    ASSERT_EQ(tree.intern(0, 0xb000, created), 1u);

    uint32_t a_new = memo->intern(tree, 0, 0xa000, created);
    EXPECT_EQ(a_new, 2u);
    EXPECT_TRUE(created);  // the new tree did not have it: its node must be written again
    uint32_t b_new = memo->intern(tree, 0, 0xb000, created);
    EXPECT_EQ(b_new, 1u);
    EXPECT_FALSE(created);
    EXPECT_EQ(tree.node_count(), 2u);
}

TEST(StackTreeMemo, PassesOnRefusalsOfAFullTreeAndRecoversAfterReset) {
    StackTree tree;
    ASSERT_TRUE(tree.init(4));
    auto memo = std::make_unique<StackTreeMemo<1024>>();
    bool created = false;
    std::vector<Key> keys = make_keys(16);
    size_t made = 0;
    while (made < keys.size() && memo->intern(tree, keys[made].parent, keys[made].ip, created)) ++made;
    ASSERT_LT(made, keys.size());
    const Key& refused = keys[made];
    EXPECT_EQ(memo->intern(tree, refused.parent, refused.ip, created), 0u);
    EXPECT_FALSE(created);

    // Once the tree has room again (a reset), the refused pair gets a real id.
    tree.reset();
    EXPECT_EQ(memo->intern(tree, refused.parent, refused.ip, created), 1u);
    EXPECT_TRUE(created);
}

// Several threads intern the same keys in different orders, many times over. Each key must get
// exactly one id, the same in every thread, with `created` reported once overall.
void intern_concurrently(bool through_memos, StackTree::Layout layout = StackTree::Layout::Hashed) {
    constexpr int kThreads = 4;
    constexpr int kRounds = 3;
    StackTree tree;
    ASSERT_TRUE(tree.init(13, {layout}));
    const std::vector<Key> keys = make_keys(3000);
    std::vector<std::atomic<int>> created_count(keys.size());
    std::vector<std::vector<uint32_t>> seen(kThreads, std::vector<uint32_t>(keys.size(), 0));
    std::atomic<bool> go{false};
    std::atomic<int> mismatches{0};

    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            auto memo = std::make_unique<StackTreeMemo<1024>>();
            std::vector<size_t> order(keys.size());
            std::iota(order.begin(), order.end(), size_t{0});
            std::mt19937 rng(1234 + t);
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            for (int round = 0; round < kRounds; ++round) {
                std::shuffle(order.begin(), order.end(), rng);
                for (size_t i : order) {
                    bool created = false;
                    uint32_t id = through_memos ? memo->intern(tree, keys[i].parent, keys[i].ip, created)
                                                : tree.intern(keys[i].parent, keys[i].ip, created);
                    if (created) created_count[i].fetch_add(1, std::memory_order_relaxed);
                    if (seen[t][i] == 0) seen[t][i] = id;
                    else if (seen[t][i] != id) mismatches.fetch_add(1, std::memory_order_relaxed);
                }
            }
        });
    }
    go.store(true, std::memory_order_release);
    for (std::thread& th : threads) th.join();

    EXPECT_EQ(mismatches.load(), 0) << "a thread got different ids for one key";
    std::set<uint32_t> ids;
    for (size_t i = 0; i < keys.size(); ++i) {
        EXPECT_EQ(created_count[i].load(), 1) << "key " << i;
        EXPECT_NE(seen[0][i], 0u) << "key " << i;
        for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t][i], seen[0][i]) << "key " << i << " thread " << t;
        ids.insert(seen[0][i]);
    }
    EXPECT_EQ(ids.size(), keys.size()) << "two keys share an id";
    EXPECT_EQ(*ids.begin(), 1u);
    EXPECT_EQ(*ids.rbegin(), keys.size());
    EXPECT_EQ(tree.node_count(), keys.size());
}

TEST_P(StackTreeLayouts, ConcurrentInterningGivesOneIdPerKeyCreatedOnce) { intern_concurrently(false, GetParam()); }

TEST(StackTreeMemo, ConcurrentInterningThroughPerThreadMemosGivesOneIdPerKeyCreatedOnce) {
    intern_concurrently(true);
    intern_concurrently(true, StackTree::Layout::ByParent);
}

// ByParent places a parent's children next to it; one with far more children than fit there
// spills to hashed places. Its neighbours' children must still be found, and ids stay exact.
TEST(StackTree, ByParentLayoutKeepsIdsExactUnderAParentWithThousandsOfChildren) {
    StackTree tree;
    ASSERT_TRUE(tree.init(16, {StackTree::Layout::ByParent}));
    std::vector<Key> keys;
    for (uint32_t parent = 1; parent < 200; ++parent) {
        size_t children = parent == 100 ? 20000 : parent % 5;
        for (size_t c = 0; c < children; ++c) keys.push_back({parent, 0x400000 + c * 8});
    }
    std::mt19937 rng(7);
    std::shuffle(keys.begin(), keys.end(), rng);
    std::vector<std::pair<Key, uint32_t>> made;
    for (const Key& k : keys) {
        bool created = false;
        uint32_t id = tree.intern(k.parent, k.ip, created);
        ASSERT_TRUE(created);
        ASSERT_EQ(id, made.size() + 1);
        made.push_back({k, id});
    }
    std::shuffle(made.begin(), made.end(), rng);
    for (const auto& [k, id] : made) {
        bool created = true;
        EXPECT_EQ(tree.intern(k.parent, k.ip, created), id);
        EXPECT_FALSE(created);
    }
    EXPECT_EQ(tree.node_count(), keys.size());
}

INSTANTIATE_TEST_SUITE_P(Layouts, StackTreeLayouts,
                         ::testing::Values(StackTree::Layout::Hashed, StackTree::Layout::ByParent),
                         [](const ::testing::TestParamInfo<StackTree::Layout>& info) {
                             return info.param == StackTree::Layout::Hashed ? "Hashed" : "ByParent";
                         });

}  // namespace
}  // namespace growtrace::preload
