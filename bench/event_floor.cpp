// The floor of each part of a full-mode event, each measured alone on bench_malloc_heavy's own
// pattern (mixed sizes, call depths 1 to 9, a small working set), in one thread, with the
// tracer's own pieces (the stack walker and the stack tree of preload/capture/) and nothing of
// the rest: what a part costs when it does its job and nothing else. bench/RESULTS.md sets these
// beside what the same parts cost inside a traced run (perf), which is where the gap is.
//
//   bench_event_floor [pairs]     prints one line per part: ns per allocation/free pair
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "churn_worker.h"
#include "format/varint.h"
#include "preload/capture/cfi_unwinder.h"
#include "preload/capture/stack_tree.h"

namespace {

using growtrace::preload::cfi_backtrace;
using growtrace::preload::kMaxWalkFrames;
using growtrace::preload::StackTree;
using growtrace::preload::StackTreeMemo;
using growtrace::preload::WalkMemo;

// What one pair does besides malloc and free: a part under test, called at the allocation
// point (deep in the recursion) and at the free.
struct Part {
    virtual ~Part() = default;
    virtual void on_alloc(void* p, size_t size) = 0;
    virtual void on_free(void* p) = 0;
};

struct Nothing : Part {
    void on_alloc(void*, size_t) override {}
    void on_free(void*) override {}
};

// The event's time: RDTSCP, as the recorder reads it (preload/support/clock.h).
struct Clock : Part {
    uint64_t sum = 0;
    void on_alloc(void*, size_t) override {
        unsigned aux;
        sum += __rdtscp(&aux);
    }
    void on_free(void*) override {
        unsigned aux;
        sum += __rdtscp(&aux);
    }
};

// The thread state's lock, taken and let go once an event (preload/record/thread_registry.h).
struct Lock : Part {
    std::atomic<bool> busy{false};
    void take() {
        while (busy.exchange(true, std::memory_order_acquire)) __builtin_ia32_pause();
        busy.store(false, std::memory_order_release);
    }
    void on_alloc(void*, size_t) override { take(); }
    void on_free(void*) override { take(); }
};

// The records: an Alloc (four varints) and a Free (two), deltas from the previous event, into a
// 64 KiB buffer that starts over when full (preload/record/recorder.cpp, SmallRecord).
struct Encode : Part {
    std::vector<uint8_t> buffer = std::vector<uint8_t>(64 * 1024);
    size_t used = 0;
    uint64_t last_ticks = 0, last_addr = 0, ticks = 0;
    uint8_t* room() {
        if (used + 64 > buffer.size()) used = 0;
        return buffer.data() + used;
    }
    void on_alloc(void* p, size_t size) override {
        using namespace growtrace::format;
        uint8_t* out = room() + 2;
        auto addr = reinterpret_cast<uint64_t>(p);
        ticks += 40;
        out = put_varint(out, zigzag_encode(static_cast<int64_t>(ticks - last_ticks)));
        out = put_varint(out, size);
        out = put_varint(out, zigzag_encode(static_cast<int64_t>(addr - last_addr)));
        out = put_varint(out, 7);
        used = static_cast<size_t>(out - buffer.data());
        last_ticks = ticks;
        last_addr = addr;
    }
    void on_free(void* p) override {
        using namespace growtrace::format;
        uint8_t* out = room() + 2;
        auto addr = reinterpret_cast<uint64_t>(p);
        ticks += 40;
        out = put_varint(out, zigzag_encode(static_cast<int64_t>(ticks - last_ticks)));
        out = put_varint(out, zigzag_encode(static_cast<int64_t>(addr - last_addr)));
        used = static_cast<size_t>(out - buffer.data());
        last_ticks = ticks;
        last_addr = addr;
    }
};

// The native stack: the walker with the thread's memo of its previous walk.
struct Capture : Part {
    std::unique_ptr<WalkMemo> memo = std::make_unique<WalkMemo>();
    uint64_t ips[kMaxWalkFrames];
    int depth = 0;
    void on_alloc(void*, size_t) override { depth = cfi_backtrace(ips, kMaxWalkFrames, memo.get()); }
    void on_free(void*) override {}
};

// The same walk without the memo: every frame stepped by its CFI rule.
struct CaptureWithoutMemo : Part {
    uint64_t ips[kMaxWalkFrames];
    int depth = 0;
    void on_alloc(void*, size_t) override { depth = cfi_backtrace(ips, kMaxWalkFrames, nullptr); }
    void on_free(void*) override {}
};

// The stack's node id: capture, then the walk interned from the outermost frame in, reusing
// the part shared with the previous stack and the thread's memo of lookups (as the recorder).
struct CaptureAndIntern : Capture {
    StackTree tree;
    StackTreeMemo<1024> lookups;
    uint64_t previous[kMaxWalkFrames] = {};
    uint32_t ids[kMaxWalkFrames] = {};
    int previous_count = 0;
    uint32_t leaf = 0;
    CaptureAndIntern() {
        if (!tree.init(22, {StackTree::Layout::ByParent, false})) std::abort();
    }
    void on_alloc(void* p, size_t size) override {
        Capture::on_alloc(p, size);
        int k = 0;
        while (k < depth && k < previous_count && previous[k] == ips[depth - 1 - k]) ++k;
        uint32_t parent = k ? ids[k - 1] : 0;
        for (; k < depth; ++k) {
            bool created;
            parent = lookups.intern(tree, parent, ips[depth - 1 - k], created);
            previous[k] = ips[depth - 1 - k];
            ids[k] = parent;
        }
        previous_count = depth;
        leaf = parent;
    }
};

// The time of one worker's `pairs` pairs, the part called where the tracer's hooks would be.
double ns_per_pair(Part& part, long pairs) {
    ChurnWorker<Part> worker(1, part);
    auto begin = std::chrono::steady_clock::now();
    worker.run(pairs);
    auto end = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(end - begin).count() / static_cast<double>(pairs);
}

double median_ns(Part& part, long pairs) {
    std::vector<double> runs;
    for (int i = 0; i < 5; ++i) runs.push_back(ns_per_pair(part, pairs));
    std::sort(runs.begin(), runs.end());
    return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    long pairs = argc > 1 ? std::atol(argv[1]) : 2000000;
    Nothing nothing;
    Clock clock;
    Lock lock;
    Encode encode;
    Capture capture;
    CaptureWithoutMemo capture_without_memo;
    CaptureAndIntern intern;
    const double base = median_ns(nothing, pairs);
    std::printf("%-34s %6.1f ns a pair\n", "malloc + free (the program alone)", base);
    struct Row {
        const char* name;
        Part* part;
    } rows[] = {
        {"+ clock (rdtscp at each event)", &clock},
        {"+ lock (xchg, store at each event)", &lock},
        {"+ records (Alloc + Free encoded)", &encode},
        {"+ native stack walk (memo)", &capture},
        {"+ native stack walk (no memo)", &capture_without_memo},
        {"+ walk and stack tree lookups", &intern},
    };
    for (const Row& row : rows) {
        double ns = median_ns(*row.part, pairs);
        std::printf("%-34s %6.1f ns a pair (part: %.1f ns)\n", row.name, ns, ns - base);
    }
    return 0;
}
