// The buffers one writer cycle collects, handed out in the order they were started.
//
// Each thread's runs must reach the compactor in the order the thread wrote them, and a
// buffer's `seq` is that order. A cycle may collect any number of buffers (every thread's
// current one, then the full queue), so they are chained through their own `next` links and
// merge-sorted as a list: no array to outgrow, and no allocation on the writer's path.
#pragma once

#include <cstddef>

namespace growtrace::preload {

// Node: anything with `Node* next` and an integer `seq` (preload/event_buffer.h's Buffer).
template <typename Node>
class StartOrder {
public:
    void add(Node* node) {
        node->next = head_;
        head_ = node;
        ++count_;
    }
    size_t size() const { return count_; }

    // Calls take(node) for every node added, by increasing seq, and forgets them. `take` may
    // reuse the node's `next` link (the buffer pool does).
    template <typename Take>
    void drain(Take&& take) {
        Node* node = sorted(head_);
        head_ = nullptr;
        count_ = 0;
        while (node) {
            Node* next = node->next;
            take(node);
            node = next;
        }
    }

private:
    static Node* merge(Node* a, Node* b) {
        Node* out = nullptr;
        Node** tail = &out;
        while (a && b) {
            Node*& first = b->seq < a->seq ? b : a;
            *tail = first;
            tail = &first->next;
            first = first->next;
        }
        *tail = a ? a : b;
        return out;
    }

    // Bottom-up: runs[i] is a sorted list of 2^i nodes or empty, as in a binary counter.
    static Node* sorted(Node* list) {
        constexpr int kRuns = 64;
        Node* runs[kRuns] = {};
        while (list) {
            Node* run = list;
            list = list->next;
            run->next = nullptr;
            int i = 0;
            for (; i < kRuns - 1 && runs[i]; ++i) {
                run = merge(runs[i], run);
                runs[i] = nullptr;
            }
            runs[i] = merge(runs[i], run);
        }
        Node* out = nullptr;
        for (Node* run : runs) out = merge(run, out);
        return out;
    }

    Node* head_ = nullptr;
    size_t count_ = 0;
};

}  // namespace growtrace::preload
