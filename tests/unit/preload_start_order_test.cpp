// StartOrder: the buffers of one writer cycle come out by the order they were started, however
// many there are, as the writer collects them: each thread's current buffer first, then the
// queue of full ones, so a thread's buffers are collected as one contiguous series among the
// others'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "preload/start_order.h"

namespace growtrace::preload {
namespace {

struct Node {
    Node* next = nullptr;
    uint64_t seq = 0;
    unsigned thread = 0;
};

// `threads` threads wrote `per_thread` buffers each, interleaved at random; the collection
// order is the writer's: the newest buffer of every thread, then the older ones in seq order.
std::vector<Node> written(unsigned threads, unsigned per_thread, std::vector<Node*>& collected) {
    std::vector<Node> nodes(size_t(threads) * per_thread);
    std::vector<unsigned> left(threads, per_thread);
    std::vector<std::vector<Node*>> of_thread(threads);
    std::mt19937 random(7);
    uint64_t seq = 0;
    for (Node& n : nodes) {
        unsigned t;
        do t = random() % threads;
        while (!left[t]);
        --left[t];
        n.seq = seq++;
        n.thread = t;
        of_thread[t].push_back(&n);
    }
    std::vector<Node*> full;
    for (auto& mine : of_thread) {
        collected.push_back(mine.back());
        mine.pop_back();
        full.insert(full.end(), mine.begin(), mine.end());
    }
    std::sort(full.begin(), full.end(), [](Node* a, Node* b) { return a->seq < b->seq; });
    collected.insert(collected.end(), full.begin(), full.end());
    return nodes;
}

void expect_start_order(unsigned threads, unsigned per_thread) {
    std::vector<Node*> collected;
    std::vector<Node> nodes = written(threads, per_thread, collected);
    StartOrder<Node> order;
    for (Node* n : collected) order.add(n);
    EXPECT_EQ(order.size(), nodes.size());
    std::vector<uint64_t> last(threads, 0);
    std::vector<bool> seen(threads, false);
    uint64_t previous = 0, count = 0;
    order.drain([&](Node* n) {
        if (count) {
            EXPECT_LT(previous, n->seq) << "buffer " << count;
        }
        if (seen[n->thread]) {
            EXPECT_LT(last[n->thread], n->seq) << "thread " << n->thread << " out of order";
        }
        seen[n->thread] = true;
        last[n->thread] = n->seq;
        previous = n->seq;
        n->next = nullptr;  // as the pool does once it has a buffer back
        ++count;
    });
    EXPECT_EQ(count, nodes.size());
    EXPECT_EQ(order.size(), 0u);
    bool none = true;
    order.drain([&](Node*) { none = false; });
    EXPECT_TRUE(none) << "a drained collection is empty";
}

TEST(StartOrder, Empty) { expect_start_order(0, 0); }
TEST(StartOrder, OneBuffer) { expect_start_order(1, 1); }
TEST(StartOrder, FewThreads) { expect_start_order(3, 5); }

// More than the 4096 buffers the writer once kept in a fixed array: those beyond were written
// unsorted, a thread's later run before its earlier one.
TEST(StartOrder, ManyMoreBuffersThanOnceFitted) { expect_start_order(300, 40); }
TEST(StartOrder, ManyMoreThreadsThanOnceFitted) { expect_start_order(6000, 2); }

}  // namespace
}  // namespace growtrace::preload
