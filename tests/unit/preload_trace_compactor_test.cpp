// TraceCompactor and EventMerger: thread runs of Alloc/Free records (as the recorder writes them)
// merged in time order and rewritten into v2 AllocCompact/FreeCompact records. Checks that each
// free refers back to the right allocation, also when its allocation's buffer arrives later,
// when addresses are reused, and across threads whose buffers arrive in any order; that a free
// waits until every thread has caught up with it, and is never lost; that frees of memory never
// seen allocated are counted, not written; and that the sink gets one record per call.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis.h"
#include "analyzer/read/record_decoder.h"
#include "format/record_encoder.h"
#include "format/trace_format.h"
#include "format/varint.h"
#include "preload/write/event_merger.h"
#include "preload/record/sampler.h"
#include "preload/write/trace_compactor.h"
#include "trace_builder.h"

namespace growtrace::preload {
namespace {

using format::RecordKind;

// Builds a buffer of thread runs the way preload/record/recorder.cpp does: a Thread record, then events
// whose ticks and addresses are deltas from the previous event of the run (address from 0).
class RunBuilder {
public:
    RunBuilder& thread(uint64_t tid, uint64_t base_ticks) {
        uint8_t payload[2 * format::kMaxVarintBytes];
        uint8_t* q = format::put_varint(payload, tid);
        q = format::put_varint(q, base_ticks);
        put(RecordKind::Thread, payload, q);
        last_ticks_ = base_ticks;
        last_addr_ = 0;
        return *this;
    }
    RunBuilder& alloc(uint64_t ticks, uint64_t size, uint64_t addr, uint64_t stack) {
        uint8_t payload[4 * format::kMaxVarintBytes];
        uint8_t* q = format::put_varint(payload, format::zigzag_encode(static_cast<int64_t>(ticks - last_ticks_)));
        q = format::put_varint(q, size);
        q = format::put_varint(q, format::zigzag_encode(static_cast<int64_t>(addr - last_addr_)));
        q = format::put_varint(q, stack);
        put(RecordKind::Alloc, payload, q);
        last_ticks_ = ticks;
        last_addr_ = addr;
        return *this;
    }
    RunBuilder& free(uint64_t ticks, uint64_t addr) {
        uint8_t payload[2 * format::kMaxVarintBytes];
        uint8_t* q = format::put_varint(payload, format::zigzag_encode(static_cast<int64_t>(ticks - last_ticks_)));
        q = format::put_varint(q, format::zigzag_encode(static_cast<int64_t>(addr - last_addr_)));
        put(RecordKind::Free, payload, q);
        last_ticks_ = ticks;
        last_addr_ = addr;
        return *this;
    }
    // A thread event of the CPython agent (CacheInsert, TypeCreate): dticks, then `body`.
    RunBuilder& event(RecordKind kind, uint64_t ticks, const std::vector<uint8_t>& body) {
        std::vector<uint8_t> payload(format::kMaxVarintBytes);
        payload.resize(static_cast<size_t>(
            format::put_varint(payload.data(), format::zigzag_encode(static_cast<int64_t>(ticks - last_ticks_))) -
            payload.data()));
        payload.insert(payload.end(), body.begin(), body.end());
        put(kind, payload.data(), payload.data() + payload.size());
        last_ticks_ = ticks;
        return *this;
    }
    const std::vector<uint8_t>& bytes() const { return bytes_; }

private:
    void put(RecordKind kind, const uint8_t* payload, const uint8_t* end) {
        bytes_.push_back(static_cast<uint8_t>(kind));
        uint8_t len[format::kMaxVarintBytes];
        auto n = static_cast<size_t>(end - payload);
        bytes_.insert(bytes_.end(), len, format::put_varint(len, n));
        bytes_.insert(bytes_.end(), payload, end);
    }

    std::vector<uint8_t> bytes_;
    uint64_t last_ticks_ = 0;
    uint64_t last_addr_ = 0;
};

void free_buffer(Buffer* b) { std::free(b); }

// Gives `runs` to `merger` as buffers of the thread state `stream`, cut between records where a
// buffer is full, as the recorder's are (the decoding state carries from one to the next).
void add_runs(EventMerger& merger, const RunBuilder& runs, uint32_t stream, uint64_t& seq) {
    const std::vector<uint8_t>& bytes = runs.bytes();
    format::Cursor c(bytes.data(), bytes.data() + bytes.size());
    Buffer* b = nullptr;
    while (!c.at_end()) {
        const uint8_t* start = c.position();
        uint8_t kind = 0;
        uint64_t length = 0;
        ASSERT_TRUE(c.byte(kind) && c.varint(length) && length <= c.remaining());
        c.skip(static_cast<size_t>(length));
        const size_t size = static_cast<size_t>(c.position() - start);
        if (b && b->used + size > kBufferBytes) {
            merger.add(b);
            b = nullptr;
        }
        if (!b) {
            b = static_cast<Buffer*>(std::calloc(1, sizeof(Buffer)));
            b->seq = ++seq;
            b->stream = stream;
        }
        std::memcpy(b->data + b->used, start, size);
        b->used += size;
    }
    if (b) merger.add(b);
}

// Hands all of `runs`, as one thread state's, to `compactor` through a merger, as the writer
// does at the trace's end.
void run_through(TraceCompactor& compactor, const RunBuilder& runs, TraceCompactor::Sink sink) {
    EventMerger merger;
    uint64_t seq = 0;
    add_runs(merger, runs, 1, seq);
    compactor.begin(sink);
    merger.merge(compactor, true, free_buffer);
}

// What the sink received: one entry per call.
std::vector<std::vector<uint8_t>> g_sink_calls;

void collect(const uint8_t* data, size_t size) { g_sink_calls.emplace_back(data, data + size); }

struct OutRecord {
    RecordKind kind = RecordKind::Thread;
    uint64_t a = 0;  // Thread: tid; AllocCompact: size; FreeCompact: age; Time: zigzag dticks
    uint64_t b = 0;  // Thread: base ticks; AllocCompact: stack
    std::vector<uint64_t> fields;  // Ledger
    std::vector<uint8_t> payload;  // thread events: the payload after dticks
};

class TraceCompactorTest : public ::testing::Test {
protected:
    void SetUp() override { g_sink_calls.clear(); }
    void TearDown() override {
        merger.reset(free_buffer);
        compactor.reset();  // unmaps its tables
    }

    // Runs `runs` (one thread state's) through the merger and the compactor, all of it as at
    // the trace's end, and decodes what was written, checking that every sink call holds
    // exactly one whole record.
    std::vector<OutRecord> process(const RunBuilder& runs) {
        add(runs, kOneState);
        return merge(true);
    }
    // `runs` as buffers of the thread state `stream`.
    void add(const RunBuilder& runs, uint32_t stream) { add_runs(merger, runs, stream, seq); }
    // What every thread state has caught up with (all of it when `final`), merged, written and
    // decoded.
    std::vector<OutRecord> merge(bool final = false) {
        size_t first = g_sink_calls.size();
        compactor.begin(collect);
        merger.merge(compactor, final, free_buffer);
        return decode_from(first);
    }
    std::vector<OutRecord> ledger() {
        size_t first = g_sink_calls.size();
        compactor.begin(collect);
        compactor.write_ledger();
        return decode_from(first);
    }
    // The CacheMisses records of the misses counted so far.
    std::vector<OutRecord> miss_counts(uint64_t ticks, bool final = false) {
        size_t first = g_sink_calls.size();
        compactor.write_miss_counts(ticks, final, collect);
        return decode_from(first);
    }
    std::vector<OutRecord> decode_from(size_t first) {
        std::vector<OutRecord> out;
        for (size_t i = first; i < g_sink_calls.size(); ++i) {
            const std::vector<uint8_t>& call = g_sink_calls[i];
            format::Cursor c(call.data(), call.data() + call.size());
            uint8_t kind = 0;
            uint64_t length = 0;
            EXPECT_TRUE(c.byte(kind) && c.varint(length)) << "sink call " << i;
            EXPECT_EQ(length, c.remaining()) << "sink call " << i << " is not exactly one record";
            OutRecord r;
            r.kind = static_cast<RecordKind>(kind);
            format::Cursor p(c.position(), c.position() + c.remaining());
            switch (r.kind) {
                case RecordKind::Thread:
                case RecordKind::AllocCompact:
                    EXPECT_TRUE(p.varint(r.a) && p.varint(r.b));
                    break;
                case RecordKind::FreeCompact:
                case RecordKind::Time:
                    EXPECT_TRUE(p.varint(r.a));
                    break;
                case RecordKind::CacheInsert:
                case RecordKind::CacheCreate:
                case RecordKind::TypeCreate: {
                    int64_t dticks = 0;
                    EXPECT_TRUE(p.svarint(dticks));
                    r.a = format::zigzag_encode(dticks);
                    r.payload.assign(p.position(), p.position() + p.remaining());
                    p.skip(p.remaining());
                    break;
                }
                case RecordKind::CacheMisses:
                    r.payload.assign(p.position(), p.position() + p.remaining());
                    p.skip(p.remaining());
                    break;
                case RecordKind::Ledger:
                    for (uint64_t v = 0; !p.at_end() && p.varint(v);) r.fields.push_back(v);
                    break;
                default:
                    ADD_FAILURE() << "unexpected record kind " << int(kind);
            }
            EXPECT_TRUE(p.at_end()) << "trailing bytes in record kind " << int(kind);
            out.push_back(r);
            replay(r);
        }
        return out;
    }

    // Follows the output as a reader would: AllocCompact n is allocation n; a FreeCompact with
    // age a frees allocation (count - a). Records the sizes of freed allocations in order.
    void replay(const OutRecord& r) {
        if (r.kind == RecordKind::AllocCompact) {
            sizes.push_back(r.a);
        } else if (r.kind == RecordKind::FreeCompact) {
            ASSERT_LT(r.a, sizes.size()) << "free refers to an allocation before the trace";
            freed_sizes.push_back(sizes[sizes.size() - 1 - r.a]);
        }
    }

    static std::vector<RecordKind> kinds(const std::vector<OutRecord>& records) {
        std::vector<RecordKind> out;
        for (const OutRecord& r : records) out.push_back(r.kind);
        return out;
    }

    static constexpr uint32_t kOneState = 1;
    TraceCompactor compactor;
    EventMerger merger;
    uint64_t seq = 0;
    std::vector<uint64_t> sizes;        // of allocation n at [n - 1]
    std::vector<uint64_t> freed_sizes;  // sizes of the allocations freed, in output order
};

constexpr uint64_t kA = 0x7f0000001000;
constexpr uint64_t kB = 0x7f0000002000;

TEST_F(TraceCompactorTest, AllocThenFreeGivesAllocCompactThenFreeCompactOfIt) {
    RunBuilder run;
    run.thread(7, 1000).alloc(1010, 64, kA, 5).free(1020, kA);
    std::vector<OutRecord> out = process(run);

    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact,
                                                   RecordKind::FreeCompact}));
    EXPECT_EQ(out[0].a, 7u);     // the thread
    EXPECT_EQ(out[0].b, 1010u);  // the reader's clock starts at the first event
    EXPECT_EQ(out[1].a, 64u);    // size
    EXPECT_EQ(out[1].b, 5u);     // stack id
    EXPECT_EQ(out[2].a, 0u);     // the latest allocation
    EXPECT_EQ(compactor.live_allocations(), 0u);
}

TEST_F(TraceCompactorTest, FreeAgeCountsAllocationsMadeSinceItsAllocation) {
    RunBuilder run;
    run.thread(1, 0).alloc(1, 10, kA, 1).alloc(2, 20, kB, 1).alloc(3, 30, kB + 64, 1).free(4, kA);
    std::vector<OutRecord> out = process(run);
    ASSERT_EQ(out.size(), 5u);
    ASSERT_EQ(out[4].kind, RecordKind::FreeCompact);
    EXPECT_EQ(out[4].a, 2u);  // allocation 1 of 3
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{10}));
    EXPECT_EQ(compactor.live_allocations(), 2u);
}

// Thread 2 frees memory that thread 1 allocated; thread 1's buffer reaches the writer later.
// The free waits, however long, until thread 1 has caught up with it; then it is matched.
TEST_F(TraceCompactorTest, FreeWaitsUntilEveryThreadHasCaughtUpWithItThenMatches) {
    RunBuilder freeing;
    freeing.thread(2, 100).free(200, kA);
    add(freeing, 2);
    merger.note(2, 300, false);
    merger.note(1, 100, false);  // thread 1 has handed over nothing after 100
    for (int cycle = 0; cycle < 10; ++cycle) EXPECT_TRUE(merge().empty()) << "cycle " << cycle;

    RunBuilder allocating;
    allocating.thread(1, 50).alloc(150, 48, kA, 3);
    add(allocating, 1);
    merger.note(1, 300, false);
    std::vector<OutRecord> out = merge();
    // Neither thread has a cache miss or a collection open: the free needs no run of its own.
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact,
                                                   RecordKind::FreeCompact}));
    EXPECT_EQ(out[0].a, 1u);
    EXPECT_EQ(out[2].a, 0u);
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{48}));
    EXPECT_EQ(compactor.live_allocations(), 0u);
    EXPECT_EQ(compactor.frees_of_untraced_memory(), 0u);
}

// Events later than what some thread has caught up with wait in their buffers; a thread that
// ended, or that never was noted (it registered after the collection began), holds nothing.
TEST_F(TraceCompactorTest, OnlyEventsEveryThreadHasCaughtUpWithAreWritten) {
    RunBuilder t1, t2;
    t1.thread(1, 0).alloc(50, 1, kA, 1).alloc(150, 2, kB, 1);
    t2.thread(2, 0).alloc(60, 3, kA + 64, 1);
    add(t1, 1);
    add(t2, 2);
    merger.note(1, 200, false);
    merger.note(2, 100, false);
    EXPECT_EQ(sizes.size(), 0u);
    merge();
    EXPECT_EQ(sizes, (std::vector<uint64_t>{1, 3}));  // 150 waits for thread 2
    merger.note(2, 100, true);                        // thread 2 ended: nothing more of it
    merge();
    EXPECT_EQ(sizes, (std::vector<uint64_t>{1, 3, 2}));
    RunBuilder t3;  // a thread never noted yet
    t3.thread(3, 0).alloc(400, 4, kB + 64, 1);
    add(t3, 3);
    merge();
    EXPECT_EQ(sizes, (std::vector<uint64_t>{1, 3, 2}));  // later than thread 1's watermark
    merger.note(1, 500, false);
    merge();
    EXPECT_EQ(sizes, (std::vector<uint64_t>{1, 3, 2, 4}));
}

TEST_F(TraceCompactorTest, FreeOfMemoryNeverAllocatedIsCountedNotWritten) {
    RunBuilder freeing;
    freeing.thread(2, 100).free(200, kA);
    add(freeing, 2);
    merger.note(2, 300, false);
    EXPECT_TRUE(merge().empty());
    EXPECT_EQ(compactor.frees_of_untraced_memory(), 1u);

    // An allocation at that address later is live: the free before it was not its.
    RunBuilder later;
    later.thread(1, 250).alloc(300, 48, kA, 3);
    add(later, 1);
    EXPECT_EQ(kinds(merge(true)), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact}));
    EXPECT_TRUE(freed_sizes.empty());
    EXPECT_EQ(compactor.live_allocations(), 1u);
}

// Attach mode: the allocator hands out an address the trace still holds live (its free went
// through libc's own calls): the old block's free is written then, and counted.
TEST_F(TraceCompactorTest, AnAddressHandedOutAgainWhileLiveEndsTheBlockThatWasThere) {
    RunBuilder run;
    run.thread(1, 0).alloc(10, 100, kA, 1).alloc(20, 200, kA, 2).free(30, kA);
    std::vector<OutRecord> out = process(run);
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact,
                                                   RecordKind::FreeCompact, RecordKind::AllocCompact,
                                                   RecordKind::FreeCompact}));
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{100, 200}));
    EXPECT_EQ(compactor.inferred_frees(), 1u);
    EXPECT_EQ(compactor.live_allocations(), 0u);
}

TEST_F(TraceCompactorTest, ReusedAddressMatchesEachFreeToItsOwnAllocation) {
    RunBuilder run;
    run.thread(1, 0).alloc(10, 100, kA, 1).free(20, kA).alloc(30, 200, kA, 2).free(40, kA);
    std::vector<OutRecord> out = process(run);
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact,
                                                   RecordKind::FreeCompact, RecordKind::AllocCompact,
                                                   RecordKind::FreeCompact}));
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{100, 200}));
    EXPECT_EQ(compactor.live_allocations(), 0u);
}

TEST_F(TraceCompactorTest, ReusedAddressInterleavedWithOtherAllocationsMatchesByAddressAndTime) {
    RunBuilder run;
    run.thread(1, 0)
        .alloc(10, 1, kA, 1)
        .alloc(11, 2, kB, 1)
        .free(12, kA)
        .alloc(13, 3, kA, 1)
        .free(14, kB)
        .free(15, kA);
    std::vector<OutRecord> out = process(run);
    std::vector<uint64_t> ages;
    for (const OutRecord& r : out)
        if (r.kind == RecordKind::FreeCompact) ages.push_back(r.a);
    EXPECT_EQ(ages, (std::vector<uint64_t>{1, 1, 0}));
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{1, 2, 3}));
    EXPECT_EQ(compactor.live_allocations(), 0u);
}

TEST_F(TraceCompactorTest, ReusedAddressAcrossThreadsWithBuffersOutOfTimeOrderMatchesByTime) {
    // Real order: t1 allocates A (10), t2 frees it (20), t2 allocates A again (30), frees it (40).
    // Thread 2's buffer reaches the writer first.
    RunBuilder t2;
    t2.thread(2, 15).free(20, kA).alloc(30, 300, kA, 2).free(40, kA);
    add(t2, 2);
    RunBuilder t1;
    t1.thread(1, 5).alloc(10, 100, kA, 1);
    add(t1, 1);
    merge(true);
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{100, 300}));
    EXPECT_EQ(compactor.live_allocations(), 0u);
}

// The case a timeout got wrong: t1 allocates A (10), t2 frees it (20), t3 allocates A (30), t1
// frees it (40). The buffer with the later free arrives first, then the first allocation, then
// the rest: each free still ends the allocation just before it at its address.
TEST_F(TraceCompactorTest, AnAddressPassedAroundThreeThreadsIsMatchedWhateverTheArrivalOrder) {
    RunBuilder t1, t2, t3;
    t1.thread(1, 0).alloc(10, 100, kA, 1).free(40, kA);
    t2.thread(2, 0).free(20, kA);
    t3.thread(3, 0).alloc(30, 300, kA, 3);
    add(t1, 1);
    merger.note(1, 50, false);
    merger.note(2, 0, false);
    merger.note(3, 0, false);
    merge();
    add(t3, 3);
    merger.note(3, 50, false);
    merge();
    EXPECT_EQ(freed_sizes.size(), 0u);  // thread 2 has not caught up: nothing after 0 is decided
    add(t2, 2);
    merger.note(2, 50, false);
    merge();
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{100, 300}));
    EXPECT_EQ(compactor.live_allocations(), 0u);
    EXPECT_EQ(compactor.frees_of_untraced_memory(), 0u);
    EXPECT_EQ(compactor.inferred_frees(), 0u);
}

TEST_F(TraceCompactorTest, LargeClockMoveWritesTimeRecordSmallOneDoesNot) {
    constexpr uint64_t kBase = 1'000'000;
    constexpr uint64_t kJump = uint64_t{1} << 20;  // well above the time quantum
    RunBuilder run;
    run.thread(1, kBase).alloc(kBase + 100, 8, kA, 1).alloc(kBase + 100 + kJump, 16, kB, 1);
    std::vector<OutRecord> out = process(run);
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact, RecordKind::Time,
                                                   RecordKind::AllocCompact}));
    EXPECT_EQ(format::zigzag_decode(out[2].a), static_cast<int64_t>(kJump));  // from the first event
    EXPECT_EQ(out[3].a, 16u);
}

// Times are written to a quantum only, except where they cross the start of shutdown: a free
// made a few ticks after exit began must be read as after it, one made before as before.
TEST_F(TraceCompactorTest, TimeCrossingTheExitIsWrittenExactlyBothWays) {
    constexpr uint64_t kBase = 1'000'000;
    compactor.mark_exit(kBase + 50);
    RunBuilder t1, t2;
    t1.thread(1, kBase).alloc(kBase + 10, 8, kA, 1).free(kBase + 60, kA);
    t2.thread(2, kBase).alloc(kBase + 20, 16, kB, 1);  // another thread's, before the exit
    add(t1, 1);
    add(t2, 2);
    std::vector<OutRecord> out = merge(true);
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact,
                                                   RecordKind::AllocCompact, RecordKind::Time,
                                                   RecordKind::FreeCompact}));
    EXPECT_EQ(format::zigzag_decode(out[3].a), 50);  // exactly to the free
    // Without an exit mark the same small moves write no Time record.
    compactor.reset();
    sizes.clear();
    RunBuilder plain;
    plain.thread(1, kBase).alloc(kBase + 10, 8, kA, 1).free(kBase + 60, kA);
    EXPECT_EQ(kinds(process(plain)), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact,
                                                              RecordKind::FreeCompact}));
}

// Attach mode sees the program's free() of blocks libc allocated itself (strdup) but not the
// allocations, and libc's own frees of blocks the program allocated: frees that find nothing
// are counted and left out, an address handed out again ends the block the trace held there,
// so a million of either leave nothing behind.
TEST_F(TraceCompactorTest, FreesTheTraceCannotMatchLeaveNothingBehind) {
    constexpr uint64_t kEvents = 1000000;
    RunBuilder runs;
    runs.thread(1, 0);
    for (uint64_t i = 0; i < kEvents; ++i) runs.free(10 + i, kA + 64 * (i % 4));
    for (uint64_t i = 0; i < kEvents; ++i) runs.alloc(30 + kEvents + i, 8, kB, 1);  // frees of these are unseen
    add(runs, 1);
    compactor.begin([](const uint8_t*, size_t) {});
    merger.merge(compactor, true, free_buffer);
    EXPECT_EQ(compactor.frees_of_untraced_memory(), kEvents);
    EXPECT_EQ(compactor.inferred_frees(), kEvents - 1);
    EXPECT_EQ(compactor.live_allocations(), 1u);
}

// The ledger at the end of a trace: what the hooks recorded, what was written, and why the two
// differ; the reader checks the file against it (analyzer/model/ledger.h).
TEST_F(TraceCompactorTest, TheLedgerCountsEveryEventAndWhyAFreeWasNotWritten) {
    RunBuilder run;
    run.thread(1, 0).free(5, kB).alloc(10, 100, kA, 1).alloc(20, 200, kA, 2).alloc(30, 300, kB, 3).free(40, kB);
    compactor.note_recorded(4, 2, 1);
    process(run);
    std::vector<OutRecord> out = ledger();
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Ledger}));
    // recorded 4 + 2, lost 1; written: 3 allocations, 2 frees (one inferred), 1 live; no
    // weightless allocation; one free of untraced memory.
    EXPECT_EQ(out[0].fields, (std::vector<uint64_t>{4, 2, 3, 2, 1, 0, 1, 1, 1}));
}

// A producer/consumer run at the event level: producers allocate (addresses reused as a
// thread cache would), a queue of at most kQueue blocks hands them to consumers, who free them.
struct HandOff {
    struct Event {
        uint32_t thread;
        bool alloc;
        uint64_t ticks, addr, size;
    };
    std::vector<Event> events;              // in time order
    std::vector<uint64_t> freed_in_order;   // sizes of the blocks freed, in the order of their frees
    uint64_t live = 0;                      // blocks the program still holds at the end

    HandOff(unsigned producers, unsigned consumers, unsigned pairs, uint64_t seed) {
        constexpr size_t kQueue = 64;
        std::mt19937_64 rng(seed);
        std::vector<uint64_t> free_addresses;  // LIFO, as a thread cache reuses them
        uint64_t next_address = kA;
        std::vector<std::pair<uint64_t, uint64_t>> queue;  // (address, size)
        uint64_t ticks = 1000;
        unsigned made = 0;
        while (made < pairs || !queue.empty()) {
            ticks += 1 + rng() % 50;
            const bool produce = made < pairs && queue.size() < kQueue && (queue.empty() || rng() % 2);
            if (produce) {
                uint64_t addr;
                if (!free_addresses.empty() && rng() % 8) {
                    addr = free_addresses.back();
                    free_addresses.pop_back();
                } else {
                    addr = next_address += 64;
                }
                const uint64_t size = ++made;  // unique: the match can be checked by size
                queue.push_back({addr, size});
                events.push_back({static_cast<uint32_t>(1 + rng() % producers), true, ticks, addr, size});
            } else {
                size_t pick = rng() % queue.size();
                auto [addr, size] = queue[pick];
                queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(pick));
                free_addresses.push_back(addr);
                freed_in_order.push_back(size);
                events.push_back({static_cast<uint32_t>(100 + rng() % consumers), false, ticks, addr, 0});
            }
        }
    }
};

// The writer gets the threads' buffers in whatever order they fill and are collected, and some
// threads are busy when a collection passes. Whatever that order, the trace written is the same,
// byte for byte, and exact: every free ends its own allocation, and nothing the program freed is
// left live.
TEST_F(TraceCompactorTest, BuffersInAnyOrderGiveTheSameTraceAndAnExactLedger) {
    const HandOff run(2, 2, 20000, 11);
    std::vector<uint8_t> first_output;
    for (uint64_t arrival_seed = 1; arrival_seed <= 6; ++arrival_seed) {
        merger.reset(free_buffer);
        merger = EventMerger();
        compactor.reset();
        sizes.clear();
        freed_sizes.clear();
        const size_t first_call = g_sink_calls.size();
        std::mt19937_64 rng(arrival_seed);
        std::map<uint32_t, size_t> handed;        // per thread: events handed over so far
        std::map<uint32_t, uint64_t> last_ticks;  // per thread: its last event handed over
        std::map<uint32_t, std::vector<size_t>> of_thread;
        for (size_t i = 0; i < run.events.size(); ++i) of_thread[run.events[i].thread].push_back(i);
        uint64_t buffer_seq = 0;
        for (size_t cut = 0; cut < run.events.size();) {
            cut = std::min(run.events.size(), cut + 1 + rng() % 3000);  // a collection's time
            const uint64_t now = run.events[cut - 1].ticks;
            std::vector<Buffer*> arriving;
            for (auto& [thread, indices] : of_thread) {
                size_t& from = handed[thread];
                size_t to = from;
                while (to < indices.size() && run.events[indices[to]].ticks <= now) ++to;
                // Its current buffer stays with it; at the end every thread hands everything over.
                const bool busy = cut < run.events.size() && rng() % 4 == 0;
                if (busy) to = from + (to - from) * (rng() % 4) / 4;
                while (from < to) {  // buffers of a random number of events
                    const size_t end = std::min(to, from + 1 + rng() % 400);
                    RunBuilder b;
                    b.thread(thread, last_ticks[thread]);
                    for (; from < end; ++from) {
                        const HandOff::Event& e = run.events[indices[from]];
                        if (e.alloc) b.alloc(e.ticks, e.size, e.addr, 1);
                        else b.free(e.ticks, e.addr);
                        last_ticks[thread] = e.ticks;
                    }
                    auto* buffer = static_cast<Buffer*>(std::calloc(1, sizeof(Buffer)));
                    std::memcpy(buffer->data, b.bytes().data(), b.bytes().size());
                    buffer->used = b.bytes().size();
                    buffer->seq = ++buffer_seq;
                    buffer->stream = thread;
                    arriving.push_back(buffer);
                }
                // A busy thread is noted with no more than it proved before (the registry notes
                // it with its creation time).
                merger.note(thread, busy ? 0 : now, false);
            }
            std::shuffle(arriving.begin(), arriving.end(), rng);
            for (Buffer* b : arriving) merger.add(b);
            merge();
        }
        merge(true);
        EXPECT_EQ(freed_sizes, run.freed_in_order) << "arrival order " << arrival_seed;
        EXPECT_EQ(compactor.live_allocations(), run.live);
        EXPECT_EQ(compactor.frees_of_untraced_memory(), 0u);
        EXPECT_EQ(compactor.inferred_frees(), 0u);
        std::vector<uint8_t> output;
        for (size_t i = first_call; i < g_sink_calls.size(); ++i)
            output.insert(output.end(), g_sink_calls[i].begin(), g_sink_calls[i].end());
        if (arrival_seed == 1) first_output = output;
        else EXPECT_EQ(output, first_output) << "arrival order " << arrival_seed << " wrote another trace";
    }
}

TEST_F(TraceCompactorTest, ResetForgetsLiveAllocations) {
    RunBuilder before;
    before.thread(1, 0).alloc(10, 100, kA, 1);
    process(before);
    EXPECT_EQ(compactor.live_allocations(), 1u);

    compactor.reset();
    EXPECT_EQ(compactor.live_allocations(), 0u);
    sizes.clear();  // a new trace starts

    RunBuilder after;
    after.thread(1, 20).alloc(30, 200, kB, 1).free(40, kA);
    EXPECT_EQ(kinds(process(after)), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact}));
    EXPECT_TRUE(freed_sizes.empty());
}

// --- sampled traces ---

std::vector<uint8_t> varints(std::initializer_list<uint64_t> values) {
    std::vector<uint8_t> out;
    for (uint64_t v : values) {
        uint8_t buf[format::kMaxVarintBytes];
        out.insert(out.end(), buf, format::put_varint(buf, v));
    }
    return out;
}

std::vector<uint8_t> with_string(std::vector<uint8_t> head, const std::string& text, std::initializer_list<uint64_t> tail) {
    std::vector<uint8_t> len = varints({text.size()});
    head.insert(head.end(), len.begin(), len.end());
    head.insert(head.end(), text.begin(), text.end());
    std::vector<uint8_t> rest = varints(tail);
    head.insert(head.end(), rest.begin(), rest.end());
    return head;
}

// TypeCreate body as the agent writes it: source, address, stack, module, qualname, metaclass.
std::vector<uint8_t> type_create(uint64_t address) {
    std::vector<uint8_t> body = varints({1, address, 0});
    for (const char* s : {"mod", "Cls", "type"}) {
        std::vector<uint8_t> str = with_string({}, s, {});
        body.insert(body.end(), str.begin(), str.end());
    }
    return body;
}

// The varint the writer appends to a TypeCreate: 1 + age of the allocation holding the class.
uint64_t type_allocation_of(const OutRecord& r) {
    format::Cursor c(r.payload.data(), r.payload.data() + r.payload.size());
    uint64_t v = 0, holder = 0;
    const uint8_t* bytes = nullptr;
    size_t size = 0;
    c.varint(v), c.varint(v), c.varint(v);
    c.bytes(bytes, size), c.bytes(bytes, size), c.bytes(bytes, size);
    EXPECT_TRUE(c.varint(holder));
    return holder;
}

class SampledCompactorTest : public TraceCompactorTest {
protected:
    void SetUp() override {
        TraceCompactorTest::SetUp();
        ASSERT_TRUE(sampler_configure(512 * 1024));
    }
    void TearDown() override {
        sampler_configure(0);
        TraceCompactorTest::TearDown();
    }
};

// A class object whose block was not sampled still gets an allocation the TypeCreate names: a
// weightless one (size 0, never a sample), written just before it; its free then ends the class.
TEST_F(SampledCompactorTest, ClassObjectNotSampledGetsAWeightlessAllocationItsFreeEnds) {
    constexpr uint64_t kClass = kA + format::kPythonGcHeaderBytes;
    RunBuilder run;
    run.thread(1, 1000).event(RecordKind::TypeCreate, 1010, type_create(kClass)).free(1020, kA);
    std::vector<OutRecord> out = process(run);
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact,
                                                   RecordKind::TypeCreate, RecordKind::FreeCompact}));
    EXPECT_EQ(out[1].a, 0u) << "a weightless allocation has size 0";
    EXPECT_EQ(type_allocation_of(out[2]), 1u) << "the TypeCreate names the allocation just before it";
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{0}));
}

// A sampled class object is named as in a full trace, with no extra allocation.
TEST_F(SampledCompactorTest, SampledClassObjectIsNamedWithoutAnExtraAllocation) {
    RunBuilder run;
    run.thread(1, 1000).alloc(1005, 900, kA, 3).event(RecordKind::TypeCreate, 1010,
                                                      type_create(kA + format::kPythonGcHeaderBytes));
    std::vector<OutRecord> out = process(run);
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact, RecordKind::TypeCreate}));
    EXPECT_EQ(type_allocation_of(out[2]), 1u);
}

TEST_F(TraceCompactorTest, FullTraceNeverAddsWeightlessAllocations) {
    RunBuilder run;
    run.thread(1, 1000).event(RecordKind::TypeCreate, 1010, type_create(kA + format::kPythonGcHeaderBytes));
    std::vector<OutRecord> out = process(run);
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::TypeCreate}));
    EXPECT_EQ(type_allocation_of(out[1]), 0u);
}

// CacheInsert begin: phase 0, cache, seq, stack, entries_before, key, key type addresses.
std::vector<uint8_t> miss(uint64_t cache, uint64_t seq, const std::string& key) {
    return with_string(varints({0, cache, seq, 7, seq}), key, {1, 0x5000});
}

std::string key_of(const OutRecord& r) {
    format::Cursor c(r.payload.data(), r.payload.data() + r.payload.size());
    uint64_t v = 0;
    for (int i = 0; i < 5; ++i) c.varint(v);
    const uint8_t* bytes = nullptr;
    size_t size = 0;
    EXPECT_TRUE(c.bytes(bytes, size));
    uint64_t n = 0, address = 0;
    EXPECT_TRUE(c.varint(n) && n == 1 && c.varint(address) && address == 0x5000) << "the key's classes are kept";
    return std::string(reinterpret_cast<const char*>(bytes), size);
}

// Key descriptions are written until a cache has shown 64 distinct ones (the analyzer's
// candidates for example keys), repeats of those too; then they are written empty. Another
// cache has its own count. A full trace keeps them all.
TEST_F(SampledCompactorTest, KeyDescriptionsAreKeptForTheFirst64DistinctKeysOfEachCache) {
    RunBuilder run;
    run.thread(1, 1000);
    uint64_t t = 1000;
    for (int i = 0; i < 70; ++i) run.event(RecordKind::CacheInsert, ++t, miss(1, i + 1, "key" + std::to_string(i)));
    run.event(RecordKind::CacheInsert, ++t, miss(1, 71, "key3"));        // seen before: kept
    run.event(RecordKind::CacheInsert, ++t, miss(2, 1, "other cache"));  // its own count
    std::vector<OutRecord> out = process(run);
    std::vector<std::string> keys;
    for (const OutRecord& r : out)
        if (r.kind == RecordKind::CacheInsert) keys.push_back(key_of(r));
    ASSERT_EQ(keys.size(), 72u);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(keys[i], "key" + std::to_string(i));
    for (int i = 64; i < 70; ++i) EXPECT_EQ(keys[i], "") << i;
    EXPECT_EQ(keys[70], "key3");
    EXPECT_EQ(keys[71], "other cache");

    sampler_configure(0);
    compactor.reset();
    RunBuilder full;
    full.thread(1, 1000);
    for (int i = 0; i < 70; ++i) full.event(RecordKind::CacheInsert, 1001 + i, miss(1, i + 1, "key" + std::to_string(i)));
    std::vector<OutRecord> all = process(full);
    EXPECT_EQ(key_of(all.back()), "key69");
}

// Sampled: times go on a grid of 2^23 ticks; a thread event happens at the run's written time.
TEST_F(SampledCompactorTest, TimesAreWrittenOnTheSampledGrid) {
    constexpr uint64_t kGrid = uint64_t{1} << 23;
    constexpr uint64_t kBase = 100 * kGrid + 12345;
    RunBuilder run;
    run.thread(1, kBase).alloc(kBase + 3 * kGrid + 777, 64, kA, 1).event(RecordKind::CacheInsert,
                                                                          kBase + 3 * kGrid + 999, miss(1, 1, "k"));
    std::vector<OutRecord> out = process(run);
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact,
                                                   RecordKind::CacheInsert}));
    EXPECT_EQ(out[0].b % kGrid, 0u);  // the reader's clock starts on the grid
    EXPECT_EQ(out[0].b, (kBase + 3 * kGrid + 777) / kGrid * kGrid);
    EXPECT_EQ(format::zigzag_decode(out[2].a), 0) << "at the run's written time";
}

// A thread with a cache miss open has its allocations attributed to that miss by the reader, by
// thread: they are written in its own run, and no other thread's in it.
TEST_F(TraceCompactorTest, AThreadWithAMissOpenGetsRunsOfItsOwn) {
    RunBuilder t1, t2;
    t1.thread(1, 0).alloc(5, 8, kA, 1).event(RecordKind::CacheInsert, 10, miss(1, 1, "k")).alloc(30, 64, kA + 64, 1);
    t1.event(RecordKind::CacheInsert, 50, varints({1, 1, 1, 0}));
    t1.alloc(70, 16, kA + 128, 1);
    t2.thread(2, 0).alloc(7, 8, kB, 1).alloc(20, 32, kB + 64, 1).alloc(60, 48, kB + 128, 1).alloc(80, 24, kB + 192, 1);
    add(t1, 1);
    add(t2, 2);
    std::vector<OutRecord> out = merge(true);
    std::vector<std::pair<uint64_t, uint64_t>> by_thread;  // (run's thread, size) of each allocation
    uint64_t run = 0;
    for (const OutRecord& r : out) {
        if (r.kind == RecordKind::Thread) run = r.a;
        if (r.kind == RecordKind::AllocCompact) by_thread.emplace_back(run, r.a);
    }
    // Before the miss and after it, thread 2's allocations share the run at hand (thread 1's);
    // while it is open, each thread's are in its own.
    EXPECT_EQ(by_thread, (std::vector<std::pair<uint64_t, uint64_t>>{
                             {1, 8}, {1, 8}, {2, 32}, {1, 64}, {1, 48}, {1, 16}, {1, 24}}));
}

// --- sampled traces: the misses of caches with a maxsize are counted ---

// CacheCreate body: cache, flags, maxsize, wrapper, dict, stack, entries, module, qualname,
// creator module, creator file, line, bound names.
std::vector<uint8_t> cache_create(uint64_t cache, int64_t maxsize) {
    std::vector<uint8_t> body = varints({cache, 0, format::zigzag_encode(maxsize), 0x100, 0x200, 0, 0});
    for (const char* s : {"mod", "f", "mod", "mod.py"}) {
        std::vector<uint8_t> str = with_string({}, s, {});
        body.insert(body.end(), str.begin(), str.end());
    }
    std::vector<uint8_t> tail = with_string(varints({3}), "mod.f", {});
    body.insert(body.end(), tail.begin(), tail.end());
    return body;
}

// CacheInsert end: phase (1 stored, 2 raised), cache, seq, value type.
std::vector<uint8_t> miss_end(uint64_t cache, uint64_t seq, bool stored = true) {
    return with_string(varints({stored ? 1u : 2u, cache, seq}), stored ? "int" : "", {});
}

struct MissCount {
    uint64_t cache = 0, misses = 0, stored = 0, first = 0, last = 0, first_entries = 0, last_entries = 0;
    std::vector<std::pair<uint64_t, uint64_t>> stacks;
};

std::vector<MissCount> decode_counts(const std::vector<OutRecord>& records) {
    std::vector<MissCount> out;
    for (const OutRecord& r : records) {
        EXPECT_EQ(r.kind, RecordKind::CacheMisses);
        format::Cursor c(r.payload.data(), r.payload.data() + r.payload.size());
        uint64_t ticks = 0, n = 0;
        EXPECT_TRUE(c.varint(ticks) && c.varint(n));
        for (uint64_t i = 0; i < n; ++i) {
            MissCount m;
            uint64_t delta = 0, stacks = 0;
            EXPECT_TRUE(c.varint(m.cache) && c.varint(m.misses) && c.varint(m.stored) && c.varint(m.first) &&
                        c.varint(delta) && c.varint(m.first_entries) && c.varint(m.last_entries) && c.varint(stacks));
            m.last = m.first + delta;
            for (uint64_t s = 0, id = 0; s < stacks; ++s) {
                uint64_t step = 0, count = 0;
                EXPECT_TRUE(c.varint(step) && c.varint(count));
                id += step;
                m.stacks.emplace_back(id, count);
            }
            out.push_back(m);
        }
        EXPECT_TRUE(c.at_end());
    }
    return out;
}

size_t count_kind(const std::vector<OutRecord>& records, RecordKind kind) {
    return static_cast<size_t>(std::count_if(records.begin(), records.end(), [&](const OutRecord& r) { return r.kind == kind; }));
}

constexpr uint64_t kGrid = uint64_t{1} << 23;

// Misses of a cache with a maxsize whose thread made no sample meanwhile leave no record of
// their own: they are counted, per cache, with their stacks and entry counts, and the count is
// written by write_miss_counts. The first miss of each distinct key is still written (the
// example keys), and an unbounded cache's misses are all written.
TEST_F(SampledCompactorTest, MissesOfABoundedCacheAreCountedUnlessTheyHoldASample) {
    RunBuilder run;
    run.thread(1, 10 * kGrid).event(RecordKind::CacheCreate, 10 * kGrid, cache_create(1, 128));
    run.event(RecordKind::CacheCreate, 10 * kGrid, cache_create(2, -1));
    uint64_t t = 10 * kGrid;
    for (uint64_t i = 0; i < 20; ++i) {
        t += kGrid;
        run.event(RecordKind::CacheInsert, t, miss(1, i + 1, "same key"));
        run.event(RecordKind::CacheInsert, t + 10, miss_end(1, i + 1, i != 5));
        run.event(RecordKind::CacheInsert, t + 20, miss(2, i + 1, "same key"));
        run.event(RecordKind::CacheInsert, t + 30, miss_end(2, i + 1));
    }
    // A miss of the bounded cache during which a sample is made: written, begin, sample, end.
    run.event(RecordKind::CacheInsert, t + kGrid, miss(1, 21, "same key")).alloc(t + kGrid + 5, 48, kA, 4);
    run.event(RecordKind::CacheInsert, t + kGrid + 9, miss_end(1, 21));
    std::vector<OutRecord> out = process(run);

    std::vector<std::pair<uint64_t, uint64_t>> written;  // cache, seq of the written begins
    for (const OutRecord& r : out) {
        if (r.kind != RecordKind::CacheInsert) continue;
        format::Cursor c(r.payload.data(), r.payload.data() + r.payload.size());
        uint64_t phase = 0, cache = 0, seq = 0;
        ASSERT_TRUE(c.varint(phase) && c.varint(cache) && c.varint(seq));
        if (phase == 0) written.emplace_back(cache, seq);
    }
    std::vector<std::pair<uint64_t, uint64_t>> expected{{1, 1}};
    for (uint64_t i = 0; i < 20; ++i) expected.emplace_back(2, i + 1);
    expected.emplace_back(1, 21);
    EXPECT_EQ(written, expected);
    EXPECT_EQ(count_kind(out, RecordKind::CacheInsert), 2 * expected.size()) << "each written begin has its end";
    // The sample falls inside the written miss 21 of cache 1.
    ASSERT_GE(out.size(), 3u);
    EXPECT_EQ(out[out.size() - 1].kind, RecordKind::CacheInsert);
    EXPECT_EQ(out[out.size() - 2].kind, RecordKind::AllocCompact);

    std::vector<MissCount> counts = decode_counts(miss_counts(99 * kGrid));
    ASSERT_EQ(counts.size(), 1u);
    EXPECT_EQ(counts[0].cache, 1u);
    EXPECT_EQ(counts[0].misses, 19u);
    EXPECT_EQ(counts[0].stored, 18u);
    EXPECT_EQ(counts[0].first, 12 * kGrid);  // miss 2 (on the grid)
    EXPECT_EQ(counts[0].last, 30 * kGrid);   // miss 20
    EXPECT_EQ(counts[0].first_entries, 2u);  // miss() gives entries_before = seq
    EXPECT_EQ(counts[0].last_entries, 21u);
    EXPECT_EQ(counts[0].stacks, (std::vector<std::pair<uint64_t, uint64_t>>{{7, 19}}));
    EXPECT_TRUE(miss_counts(100 * kGrid).empty()) << "a window is written once";
}

// A held miss stays in its place among the thread's other misses: when a miss that is written
// begins inside it, or a sample is made in a miss nested in it, the held begins are written
// first, outermost first, so the reader attributes the sample to the same (innermost) miss.
TEST_F(SampledCompactorTest, HeldMissesAreWrittenOutermostFirstWhenSomethingInsideThemIs) {
    RunBuilder run;
    run.thread(1, 10 * kGrid).event(RecordKind::CacheCreate, 10 * kGrid, cache_create(1, 128));
    run.event(RecordKind::CacheCreate, 10 * kGrid, cache_create(2, -1));
    run.event(RecordKind::CacheInsert, 11 * kGrid, miss(1, 1, "k")).event(RecordKind::CacheInsert, 11 * kGrid + 1,
                                                                          miss_end(1, 1));  // key k is now known
    run.event(RecordKind::CacheInsert, 12 * kGrid, miss(1, 2, "k"));      // held
    run.event(RecordKind::CacheInsert, 12 * kGrid + 1, miss(1, 3, "k"));  // held, nested
    run.event(RecordKind::CacheInsert, 12 * kGrid + 2, miss(2, 1, "u"));  // written: the two come first
    run.alloc(12 * kGrid + 3, 100, kA, 4);
    run.event(RecordKind::CacheInsert, 12 * kGrid + 4, miss_end(2, 1));
    run.event(RecordKind::CacheInsert, 12 * kGrid + 5, miss_end(1, 3));
    run.event(RecordKind::CacheInsert, 12 * kGrid + 6, miss_end(1, 2));
    std::vector<OutRecord> out = process(run);
    std::vector<std::string> seen;
    for (const OutRecord& r : out) {
        if (r.kind == RecordKind::AllocCompact) seen.push_back("alloc");
        if (r.kind != RecordKind::CacheInsert) continue;
        format::Cursor c(r.payload.data(), r.payload.data() + r.payload.size());
        uint64_t phase = 0, cache = 0, seq = 0;
        ASSERT_TRUE(c.varint(phase) && c.varint(cache) && c.varint(seq));
        seen.push_back((phase == 0 ? "begin " : "end ") + std::to_string(cache) + "." + std::to_string(seq));
    }
    EXPECT_EQ(seen, (std::vector<std::string>{"begin 1.1", "end 1.1", "begin 1.2", "begin 1.3", "begin 2.1", "alloc",
                                              "end 2.1", "end 1.3", "end 1.2"}));
    EXPECT_TRUE(miss_counts(20 * kGrid).empty());

    // A sample straight inside a held miss writes it; one in another thread does not.
    RunBuilder more;
    more.thread(1, 13 * kGrid).event(RecordKind::CacheInsert, 13 * kGrid, miss(1, 4, "k"));
    more.thread(2, 13 * kGrid).alloc(13 * kGrid + 1, 100, kB, 4);
    more.thread(1, 13 * kGrid + 2).event(RecordKind::CacheInsert, 13 * kGrid + 3, miss_end(1, 4));
    more.thread(1, 14 * kGrid).event(RecordKind::CacheInsert, 14 * kGrid, miss(1, 5, "k"));
    more.alloc(14 * kGrid + 1, 100, kB + 256, 4).event(RecordKind::CacheInsert, 14 * kGrid + 2, miss_end(1, 5));
    std::vector<OutRecord> later = process(more);
    EXPECT_EQ(count_kind(later, RecordKind::CacheInsert), 2u) << "miss 5 only, begin and end";
    std::vector<MissCount> counts = decode_counts(miss_counts(20 * kGrid));
    ASSERT_EQ(counts.size(), 1u);
    EXPECT_EQ(counts[0].misses, 1u);  // miss 4
    EXPECT_EQ(counts[0].first, 13 * kGrid);
}

// The trace ends (or the buffer ends) inside a held miss: it stays held across buffers, and the
// final count includes it as a miss that was not stored.
TEST_F(SampledCompactorTest, AMissStillOpenWhenTheTraceEndsIsCounted) {
    RunBuilder run;
    run.thread(1, 10 * kGrid).event(RecordKind::CacheCreate, 10 * kGrid, cache_create(1, 8));
    run.event(RecordKind::CacheInsert, 11 * kGrid, miss(1, 1, "k")).event(RecordKind::CacheInsert, 11 * kGrid + 1,
                                                                          miss_end(1, 1));
    run.event(RecordKind::CacheInsert, 12 * kGrid, miss(1, 2, "k"));
    EXPECT_EQ(count_kind(process(run), RecordKind::CacheInsert), 2u);
    EXPECT_TRUE(miss_counts(13 * kGrid).empty()) << "still open: not counted yet";
    std::vector<MissCount> counts = decode_counts(miss_counts(14 * kGrid, true));
    ASSERT_EQ(counts.size(), 1u);
    EXPECT_EQ(counts[0].misses, 1u);
    EXPECT_EQ(counts[0].stored, 0u);
}

// Every miss of a window may come from a stack of its own (a new thread per request): each is
// counted under its stack, the stacks written in increasing order as steps.
TEST_F(SampledCompactorTest, CountedMissesKeepEachOfTheirStacks) {
    RunBuilder run;
    run.thread(1, 10 * kGrid).event(RecordKind::CacheCreate, 10 * kGrid, cache_create(1, 128));
    run.event(RecordKind::CacheInsert, 11 * kGrid, miss(1, 1, "k")).event(RecordKind::CacheInsert, 11 * kGrid + 1,
                                                                          miss_end(1, 1));
    const uint64_t stacks[] = {900, 40, 41, 900, 7000};
    uint64_t seq = 1;
    for (uint64_t stack : stacks) {
        ++seq;
        run.event(RecordKind::CacheInsert, 12 * kGrid + seq, with_string(varints({0, 1, seq, stack, seq}), "k", {0}));
        run.event(RecordKind::CacheInsert, 12 * kGrid + seq, miss_end(1, seq));
    }
    EXPECT_EQ(count_kind(process(run), RecordKind::CacheInsert), 2u);
    std::vector<MissCount> counts = decode_counts(miss_counts(20 * kGrid));
    ASSERT_EQ(counts.size(), 1u);
    EXPECT_EQ(counts[0].misses, 5u);
    EXPECT_EQ(counts[0].stacks, (std::vector<std::pair<uint64_t, uint64_t>>{{40, 1}, {41, 1}, {900, 2}, {7000, 1}}));
}

// A full trace writes every miss.
TEST_F(TraceCompactorTest, FullTraceWritesEveryMissOfABoundedCache) {
    RunBuilder run;
    run.thread(1, 1000).event(RecordKind::CacheCreate, 1000, cache_create(1, 128));
    for (uint64_t i = 0; i < 5; ++i)
        run.event(RecordKind::CacheInsert, 1001 + 2 * i, miss(1, i + 1, "k"))
            .event(RecordKind::CacheInsert, 1002 + 2 * i, miss_end(1, i + 1));
    EXPECT_EQ(count_kind(process(run), RecordKind::CacheInsert), 10u);
    EXPECT_TRUE(miss_counts(5000).empty());
}


// --- sampled traces: short-lived samples are counted per block ---

// What a reader makes of a trace written from whole blocks of records (the writer's blocks).
struct ReadBack : RecordVisitor {
    struct Event {
        uint8_t kind;
        uint64_t tid, ticks, value;  // AllocCompact: size; FreeCompact: size of what it frees; TypeCreate: size held
    };
    std::vector<Event> events;
    std::vector<uint64_t> sizes;  // of allocation n at [n - 1]
    std::vector<ShortLivedGroup> short_lived;
    std::vector<uint64_t> short_lived_last;

    void on_alloc_compact(const AllocCompactEvent& e) override {
        sizes.push_back(e.size);
        events.push_back({0x12, e.tid, e.ticks, e.size});
    }
    void on_free_compact(const FreeCompactEvent& e) override { events.push_back({0x13, e.tid, e.ticks, sizes.at(e.seq - 1)}); }
    void on_type_create(const TypeCreateRecord& r) override {
        events.push_back({0x32, r.tid, r.ticks, r.allocation_seq ? sizes.at(r.allocation_seq - 1) : ~uint64_t{0}});
    }
    void on_cache_insert(const CacheInsertRecord& r) override { events.push_back({0x31, r.tid, r.ticks, r.phase}); }
    void on_collection(const CollectionRecord& r) override { events.push_back({0x35, r.tid, r.ticks, r.phase}); }
    void on_short_lived_samples(const ShortLivedSamplesRecord& r) override {
        short_lived.insert(short_lived.end(), r.groups.begin(), r.groups.end());
        short_lived_last.push_back(r.last_ticks);
    }
};

bool operator==(const ReadBack::Event& a, const ReadBack::Event& b) {
    return a.kind == b.kind && a.tid == b.tid && a.ticks == b.ticks && a.value == b.value;
}

std::ostream& operator<<(std::ostream& out, const ReadBack::Event& e) {
    return out << "{kind " << int(e.kind) << " tid " << e.tid << " ticks " << e.ticks << " value " << e.value << "}";
}

std::vector<uint8_t> encoded(const format::RecordEncoder& rec) {
    std::vector<uint8_t> out(rec.size());
    rec.finish(out.data());
    return out;
}

// The records a sampled trace's writer puts before the first thread run.
std::vector<uint8_t> trace_start(uint64_t start_ticks, uint64_t sample_period) {
    format::RecordEncoder process(RecordKind::Process);
    process.varint(4242).varint(1).varint(start_ticks).varint(start_ticks).varint(1).string("/bin/app").string("app").string("");
    format::RecordEncoder sampling(RecordKind::Sampling);
    sampling.varint(sample_period);
    std::vector<uint8_t> out = encoded(process);
    std::vector<uint8_t> more = encoded(sampling);
    out.insert(out.end(), more.begin(), more.end());
    return out;
}

// A trace file of these blocks of records, as the writer stores them (checksummed, prefixed).
std::string write_blocks(const std::vector<std::vector<uint8_t>>& blocks, const std::string& name) {
    growtrace::testing::TraceBuilder b;
    for (const std::vector<uint8_t>& block : blocks) {
        format::Cursor c(block.data(), block.data() + block.size());
        uint8_t kind = 0;
        uint64_t length = 0;
        while (c.byte(kind) && c.varint(length)) {
            b.raw_record(kind, std::vector<uint8_t>(c.position(), c.position() + length));
            c.skip(static_cast<size_t>(length));
        }
        EXPECT_TRUE(c.at_end());
        b.end_block(format::Codec::ZstdWithPrefix);
    }
    const std::string path = growtrace::testing::temp_trace_path(name);
    b.write(path, format::kSampledVersion, format::Codec::ZstdWithPrefix);
    return path;
}

ReadBack read_back(const std::vector<std::vector<uint8_t>>& blocks, const std::string& name) {
    ReadBack r;
    read_trace(write_blocks(blocks, name), r);
    return r;
}

// What a compactor that never folds wrote (the trace as it was before short-lived samples).
std::vector<uint8_t> g_plain_output;

void collect_plain(const uint8_t* data, size_t size) { g_plain_output.insert(g_plain_output.end(), data, data + size); }

class ShortLivedTest : public SampledCompactorTest {
protected:
    void TearDown() override {
        plain_merger.reset(free_buffer);
        plain.reset();
        SampledCompactorTest::TearDown();
    }
    // The same runs through the compactor that never folds: the block as it used to be.
    std::vector<uint8_t> plain_block(const RunBuilder& runs, std::vector<uint8_t> head = {}) {
        g_plain_output = std::move(head);
        run_through(plain, runs, collect_plain);
        return g_plain_output;
    }
    // Runs through the compactor, its records left undecoded (Collection records among them).
    void feed(const RunBuilder& runs) { run_through(compactor, runs, collect); }
    // One writer cycle: each thread's buffer, all caught up to `until`, through both compactors.
    void feed_cycle(const std::vector<RunBuilder>& runs, uint64_t until) {
        cycle(merger, compactor, runs, until, collect);
    }
    std::vector<uint8_t> plain_cycle(const std::vector<RunBuilder>& runs, uint64_t until, std::vector<uint8_t> head) {
        g_plain_output = std::move(head);
        cycle(plain_merger, plain, runs, until, collect_plain);
        return g_plain_output;
    }
    void cycle(EventMerger& m, TraceCompactor& c, const std::vector<RunBuilder>& runs, uint64_t until,
               TraceCompactor::Sink sink) {
        for (size_t i = 0; i < runs.size(); ++i) {
            add_runs(m, runs[i], static_cast<uint32_t>(i + 1), seq);
            m.note(static_cast<uint32_t>(i + 1), until, false);
        }
        c.begin(sink);
        m.merge(c, false, free_buffer);
    }
    // The block of everything the compactor wrote since `first` sink call, after `head`.
    std::vector<uint8_t> block_since(size_t first, std::vector<uint8_t> head = {}) {
        for (size_t i = first; i < g_sink_calls.size(); ++i)
            head.insert(head.end(), g_sink_calls[i].begin(), g_sink_calls[i].end());
        return head;
    }
    // The block as the writer writes it: folded when something was counted.
    std::vector<uint8_t> folded(const std::vector<uint8_t>& block) {
        std::vector<uint8_t> out(block.size() + 64 * 1024);
        size_t n = compactor.fold_short_lived(block.data(), block.size(), out.data(), out.size());
        if (!n) return block;
        out.resize(n);
        return out;
    }

    TraceCompactor plain;
    EventMerger plain_merger;
};

// Start of the trace, and where its events begin: 600 grid steps in, the writer's intervals are
// two grid steps wide (600 x 2^23 ticks needs windows of 2^24 to make at most 512 of them), and
// start at even steps from the trace's start.
constexpr uint64_t kOrigin = 7 * kGrid;
constexpr uint64_t kAt = kOrigin + 600 * kGrid;

// A sample allocated and freed within one interval, that nothing else names, leaves the block
// as a count; the others stay as they were: one freed in the next interval, one a TypeCreate
// names, one freed inside a collection, one still live, and a weightless class allocation.
// Every record left is read at the time and with the allocation it had.
TEST_F(ShortLivedTest, SamplesBornAndFreedWithinAnIntervalAreCountedAndTheRestReadAsBefore) {
    constexpr uint64_t kC = 0x7f0000003000, kD = 0x7f0000004000, kE = 0x7f0000005000, kF = 0x7f0000006000;
    constexpr uint64_t kG = 0x7f0000007000;
    RunBuilder run;
    run.thread(1, kAt);
    run.alloc(kAt + 5, 100, kA, 1).free(kAt + 100, kA);                          // counted
    run.alloc(kAt + kGrid + 5, 201, kB, 2).free(kAt + 2 * kGrid + 5, kB);        // into the next interval
    run.alloc(kAt + 2 * kGrid + 10, 302, kC, 3);                                // named by a TypeCreate
    run.event(RecordKind::TypeCreate, kAt + 2 * kGrid + 20, type_create(kC + format::kPythonGcHeaderBytes));
    run.free(kAt + 2 * kGrid + 30, kC);
    run.alloc(kAt + 2 * kGrid + 40, 403, kD, 4);                                // stays live
    run.alloc(kAt + 2 * kGrid + 50, 100, kF, 1).free(kAt + 2 * kGrid + 60, kF);  // counted
    run.event(RecordKind::TypeCreate, kAt + 2 * kGrid + 70, type_create(kG + format::kPythonGcHeaderBytes));
    run.free(kAt + 2 * kGrid + 80, kG);                                         // weightless: no sample
    run.thread(2, kAt + 3 * kGrid);
    run.event(RecordKind::Collection, kAt + 3 * kGrid, varints({0, 2, 0}));
    run.alloc(kAt + 3 * kGrid + 1, 505, kE, 5).free(kAt + 3 * kGrid + 2, kE);    // garbage of a collection
    run.event(RecordKind::Collection, kAt + 3 * kGrid + 3, varints({1, 2, 0}));
    run.alloc(kAt + 3 * kGrid + 4, 100, kA, 1).free(kAt + 3 * kGrid + 9, kA);    // counted, thread 2
    feed(run);
    const std::vector<uint8_t> first = block_since(0, trace_start(kOrigin, 4096));
    const std::vector<uint8_t> plain_first = plain_block(run, trace_start(kOrigin, 4096));
    ASSERT_EQ(first, plain_first);

    // The next block frees the live sample: by its number as the folded block left it.
    RunBuilder later;
    later.thread(1, kAt + 9 * kGrid).free(kAt + 9 * kGrid + 1, kD).alloc(kAt + 9 * kGrid + 2, 606, kB, 6);
    const size_t calls = g_sink_calls.size();
    const std::vector<uint8_t> folded_first = folded(first);
    feed(later);
    const std::vector<uint8_t> second = block_since(calls);
    ASSERT_EQ(folded(second), second) << "nothing to count in the second block";

    ReadBack as_written = read_back({plain_first, plain_block(later)}, "short_lived_as_is");
    ReadBack as_folded = read_back({folded_first, second}, "short_lived_folded");
    std::vector<ReadBack::Event> expected;
    for (const ReadBack::Event& e : as_written.events)
        if (e.value != 100) expected.push_back(e);
    EXPECT_EQ(as_folded.events, expected);
    EXPECT_TRUE(as_written.short_lived.empty());
    ASSERT_EQ(as_folded.short_lived.size(), 2u);
    // Intervals of 2^24 ticks from the start: grid steps 600-601 and 602-603.
    EXPECT_EQ(as_folded.short_lived[0].ticks, kAt);
    EXPECT_EQ(as_folded.short_lived[0].stack_id, 1u);
    EXPECT_EQ(as_folded.short_lived[0].size, 100u);
    EXPECT_EQ(as_folded.short_lived[0].count, 1u);
    EXPECT_EQ(as_folded.short_lived[1].ticks, kAt + 2 * kGrid);
    EXPECT_EQ(as_folded.short_lived[1].count, 2u) << "one count for the stack and size in an interval";
    EXPECT_EQ(as_folded.short_lived_last, (std::vector<uint64_t>{kAt + 3 * kGrid}));
}

// The same sampled workload written as it used to be and with its short-lived samples counted:
// a minute of three threads, each with short-lived samples from twenty stacks (most freed
// within milliseconds, some later), a stack that leaks and one that holds its blocks for two
// seconds, in blocks of 5 s. The analysis gives the same figures per stack, the same totals,
// timeline, groups and verdicts.
TEST_F(ShortLivedTest, AnAnalysisOfCountedSamplesIsTheAnalysisOfTheirRecords) {
    constexpr uint64_t kMs = 1000000;  // ticks are nanoseconds: the time marks say so
    constexpr uint64_t kStart = 1000 * kMs;
    struct Event {
        uint64_t ticks;
        bool alloc;
        uint64_t size, addr, stack;
    };
    std::vector<std::vector<Event>> threads(3);
    std::mt19937_64 random(42);
    auto uniform = [&](uint64_t low, uint64_t high) { return std::uniform_int_distribution<uint64_t>(low, high)(random); };
    uint64_t next_addr = 0x7f0000000000;
    for (uint64_t t = kStart + kMs; t < kStart + 60000 * kMs; t += uniform(1, 4) * kMs) {
        auto& events = threads[uniform(0, 2)];
        const uint64_t addr = next_addr += 4096;
        const uint64_t kind = uniform(0, 99);
        uint64_t stack = 10 + uniform(0, 19), life = uniform(1, 30) * kMs / uniform(1, 10);
        if (kind < 5) stack = 50, life = 0;                   // leaks
        else if (kind < 15) stack = 60, life = 2000 * kMs;    // held for two seconds
        else if (kind < 20) life = uniform(100, 3000) * kMs;  // short-lived stacks, now and then longer
        events.push_back({t, true, uniform(16, 200000), addr, stack});
        if (life) events.push_back({t + life, false, 0, addr, 0});
    }
    for (auto& events : threads)
        std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ticks < b.ticks; });

    std::vector<uint8_t> head = trace_start(kStart, 65536);
    for (uint64_t stack = 10; stack <= 60; ++stack) {
        format::RecordEncoder node(RecordKind::StackNode);
        std::vector<uint8_t> bytes = encoded(node.varint(stack).varint(0).varint(0x400000 + 16 * stack));
        head.insert(head.end(), bytes.begin(), bytes.end());
    }
    std::vector<std::vector<uint8_t>> as_is, counted;
    std::vector<size_t> next(threads.size(), 0);
    std::vector<uint8_t> plain_records = head, records = head;
    for (uint64_t cycle_end = kStart + 100 * kMs; cycle_end <= kStart + 65000 * kMs; cycle_end += 100 * kMs) {
        std::vector<RunBuilder> runs(threads.size());  // each thread's buffer of the cycle
        for (size_t tid = 0; tid < threads.size(); ++tid) {
            runs[tid].thread(tid + 1, cycle_end - 100 * kMs);
            for (; next[tid] < threads[tid].size() && threads[tid][next[tid]].ticks < cycle_end; ++next[tid]) {
                const Event& e = threads[tid][next[tid]];
                if (e.alloc) runs[tid].alloc(e.ticks, e.size, e.addr, e.stack);
                else runs[tid].free(e.ticks, e.addr);
            }
        }
        const size_t first = g_sink_calls.size();
        feed_cycle(runs, cycle_end - 1);
        records = block_since(first, records);
        plain_records = plain_cycle(runs, cycle_end - 1, plain_records);
        format::RecordEncoder mark(RecordKind::TimeMark);
        const std::vector<uint8_t> mark_bytes = encoded(mark.varint(cycle_end).varint(cycle_end).varint(1 << 30));
        records.insert(records.end(), mark_bytes.begin(), mark_bytes.end());
        plain_records.insert(plain_records.end(), mark_bytes.begin(), mark_bytes.end());
        if ((cycle_end - kStart) % (5000 * kMs) == 0) {  // a block every 5 s
            counted.push_back(folded(records));
            as_is.push_back(plain_records);
            records.clear();
            plain_records.clear();
        }
    }
    ASSERT_TRUE(records.empty() && plain_records.empty());

    const ReadBack folded_back = read_back(counted, "short_lived_counted_records");
    uint64_t samples_counted = 0;
    for (const ShortLivedGroup& g : folded_back.short_lived) samples_counted += g.count;
    EXPECT_GT(samples_counted, folded_back.sizes.size()) << "most samples counted";
    size_t bytes_as_is = 0, bytes_counted = 0;
    for (const auto& b : as_is) bytes_as_is += b.size();
    for (const auto& b : counted) bytes_counted += b.size();
    EXPECT_LT(bytes_counted, bytes_as_is * 3 / 4);

    AnalyzeTraceOptions options;
    options.stack_profiles = true;
    const AnalysisResult before = analyze_trace(write_blocks(as_is, "short_lived_as_is_trace"), options);
    const AnalysisResult after = analyze_trace(write_blocks(counted, "short_lived_counted_trace"), options);
    auto near = [](double a, double b) { return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)}); };
    EXPECT_EQ(before.sample_period, 65536u);
    EXPECT_EQ(before.window_s, after.window_s);
    EXPECT_TRUE(near(before.totals.allocations, after.totals.allocations));
    EXPECT_TRUE(near(before.totals.frees, after.totals.frees));
    EXPECT_TRUE(near(before.totals.peak_bytes, after.totals.peak_bytes));
    EXPECT_TRUE(near(before.totals.retained_bytes, after.totals.retained_bytes));
    EXPECT_EQ(before.totals.samples, after.totals.samples);
    EXPECT_EQ(before.totals.live_samples, after.totals.live_samples);
    EXPECT_EQ(before.totals.matched_frees, after.totals.matched_frees);
    ASSERT_EQ(before.timeline.size(), after.timeline.size());
    for (size_t w = 0; w < before.timeline.size(); ++w)
        EXPECT_TRUE(near(before.timeline[w].heap_bytes, after.timeline[w].heap_bytes)) << "window " << w;
    // Per stack: what it allocated, what it holds, its verdict.
    ASSERT_EQ(before.stack_profiles.size(), after.stack_profiles.size());
    ASSERT_EQ(before.stack_profiles.size(), 22u);
    auto by_frames = [](const AnalysisResult& r) {  // frames are numbered in the order each analysis met them
        std::map<std::vector<uint64_t>, StackProfile> out;
        for (const StackProfile& p : r.stack_profiles) {
            std::vector<uint64_t> ips;
            for (uint32_t f : p.frames) ips.push_back(r.profile_frames.at(f).ip);
            out[ips] = p;
        }
        return out;
    };
    const auto profiles_before = by_frames(before), profiles_after = by_frames(after);
    for (const auto& [frames, b] : profiles_before) {
        ASSERT_TRUE(profiles_after.count(frames));
        const StackProfile& a = profiles_after.at(frames);
        EXPECT_TRUE(near(b.alloc_bytes, a.alloc_bytes));
        EXPECT_TRUE(near(b.alloc_objects, a.alloc_objects));
        EXPECT_TRUE(near(b.inuse_bytes, a.inuse_bytes));
        EXPECT_TRUE(near(b.inuse_objects, a.inuse_objects));
        EXPECT_EQ(b.verdict, a.verdict);
        EXPECT_TRUE(near(b.growth_bytes_per_s, a.growth_bytes_per_s));
    }
    auto verdicts = [](const std::vector<GroupReport>& groups) {
        std::vector<std::string> out;
        for (const GroupReport& g : groups) {
            // Sums in another order may end a hair below zero: "-0 B" then says "0 B".
            std::string reason = g.verdict.reason;
            for (size_t at; (at = reason.find("-0 B")) != std::string::npos;) reason.erase(at, 1);
            out.push_back(std::string(growth_class_name(g.verdict.cls)) + ": " + reason + " from " +
                          std::to_string(g.verdict.started_at_s));
        }
        return out;
    };
    EXPECT_EQ(verdicts(before.findings), verdicts(after.findings));
    EXPECT_EQ(verdicts(before.groups), verdicts(after.groups));
    EXPECT_EQ(before.findings.size(), 1u) << "the leak";
    EXPECT_FALSE(before.groups.empty());
}

// The program's exit: a free after it is shutdown, which the reader leaves out, so it is written.
TEST_F(ShortLivedTest, FreesAfterTheExitAreWritten) {
    RunBuilder run;
    run.thread(1, kAt).alloc(kAt + 5, 100, kA, 1).free(kAt + 50, kA).alloc(kAt + 60, 100, kB, 1);
    run.free(kAt + 90, kB);
    compactor.mark_exit(kAt + 70);
    process(run);
    ReadBack r = read_back({folded(block_since(0, trace_start(kOrigin, 4096)))}, "short_lived_exit");
    ASSERT_EQ(r.short_lived.size(), 1u);
    EXPECT_EQ(r.short_lived[0].count, 1u);
    ASSERT_EQ(r.events.size(), 2u);
    EXPECT_EQ(r.events[1].ticks, kAt + 90) << "exact where it crosses the exit";
}

// A block the ledger does not describe (its allocations are not the ones counted since the last
// block) is written as it is, and so is one of a full trace.
TEST_F(ShortLivedTest, ABlockThatIsNotTheLedgersIsWrittenAsItIs) {
    RunBuilder run;
    run.thread(1, kAt).alloc(kAt + 5, 100, kA, 1).free(kAt + 50, kA);
    process(run);
    const std::vector<uint8_t> start = trace_start(kOrigin, 4096);
    const std::vector<uint8_t> block = block_since(0, start);
    EXPECT_EQ(folded(start), start) << "a block without the allocations the ledger holds";
    EXPECT_EQ(folded(block), block) << "the ledger started again after the block before";
}

}  // namespace
}  // namespace growtrace::preload
