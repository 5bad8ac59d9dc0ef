// TraceCompactor: thread runs of Alloc/Free records (as the recorder writes them) rewritten into
// v2 AllocCompact/FreeCompact records. Checks that each free refers back to the right
// allocation, also when its allocation comes in a later run, when addresses are reused, and
// across threads whose runs arrive out of time order; that frees of memory never seen
// allocated are dropped after the pending window; and that the sink gets one record per call.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include <cstdint>
#include <string>
#include <vector>

#include "format/trace_format.h"
#include "format/varint.h"
#include "preload/sampler.h"
#include "preload/trace_compactor.h"

namespace growtrace::preload {
namespace {

using format::RecordKind;

// Builds a buffer of thread runs the way preload/recorder.cpp does: a Thread record, then events
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

// What the sink received: one entry per call.
std::vector<std::vector<uint8_t>> g_sink_calls;

void collect(const uint8_t* data, size_t size) { g_sink_calls.emplace_back(data, data + size); }

struct OutRecord {
    RecordKind kind = RecordKind::Thread;
    uint64_t a = 0;  // Thread: tid; AllocCompact: size; FreeCompact: age; Time: zigzag dticks
    uint64_t b = 0;  // Thread: base ticks; AllocCompact: stack
    std::vector<uint8_t> payload;  // thread events: the payload after dticks
};

class TraceCompactorTest : public ::testing::Test {
protected:
    void SetUp() override { g_sink_calls.clear(); }
    void TearDown() override { compactor.reset(); }  // unmaps its tables

    // Runs `runs` through the compactor and decodes what it wrote, checking that every sink
    // call holds exactly one whole record.
    std::vector<OutRecord> process(const RunBuilder& runs) {
        size_t first = g_sink_calls.size();
        compactor.process(runs.bytes().data(), runs.bytes().size(), collect);
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
                case RecordKind::TypeCreate: {
                    int64_t dticks = 0;
                    EXPECT_TRUE(p.svarint(dticks));
                    r.a = format::zigzag_encode(dticks);
                    r.payload.assign(p.position(), p.position() + p.remaining());
                    p.skip(p.remaining());
                    break;
                }
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

    TraceCompactor compactor;
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
    EXPECT_EQ(out[0].a, 7u);     // the Thread record passes on unchanged
    EXPECT_EQ(out[0].b, 1000u);
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

TEST_F(TraceCompactorTest, FreeWhoseAllocationArrivesInALaterRunWithinPendingWindowMatches) {
    // Thread 2 frees memory that thread 1 allocated; thread 1's run reaches the writer two
    // cycles later.
    RunBuilder freeing;
    freeing.thread(2, 100).free(200, kA);
    std::vector<OutRecord> first = process(freeing);
    EXPECT_EQ(kinds(first), (std::vector<RecordKind>{RecordKind::Thread}));
    compactor.end_cycle();
    compactor.end_cycle();

    RunBuilder allocating;
    allocating.thread(1, 50).alloc(150, 48, kA, 3);
    std::vector<OutRecord> second = process(allocating);
    ASSERT_EQ(kinds(second), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact,
                                                      RecordKind::FreeCompact}));
    EXPECT_EQ(second[2].a, 0u);
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{48}));
    EXPECT_EQ(compactor.live_allocations(), 0u);
}

TEST_F(TraceCompactorTest, FreeOfMemoryNeverAllocatedIsDroppedAfterPendingWindow) {
    RunBuilder freeing;
    freeing.thread(2, 100).free(200, kA);
    EXPECT_EQ(kinds(process(freeing)), (std::vector<RecordKind>{RecordKind::Thread}));
    for (int i = 0; i < 3; ++i) compactor.end_cycle();

    // An allocation at that address showing up now (even one older than the free) is not ended
    // by the dropped free.
    RunBuilder late;
    late.thread(1, 50).alloc(150, 48, kA, 3);
    EXPECT_EQ(kinds(process(late)), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact}));
    EXPECT_TRUE(freed_sizes.empty());
    EXPECT_EQ(compactor.live_allocations(), 1u);
}

// Unmatched frees are aged in place (erasing shifts colliding entries back): with thousands
// pending from two cycles, exactly the older cycle's are dropped and the newer still match.
TEST_F(TraceCompactorTest, AgingManyPendingFreesDropsExactlyTheExpiredOnes) {
    constexpr uint64_t kCount = 3000;
    RunBuilder older, newer;
    older.thread(2, 100);
    newer.thread(3, 100);
    for (uint64_t i = 0; i < kCount; ++i) {
        older.free(200 + i, kA + 32 * i);
        newer.free(200 + i, kA + 32 * i + 16);
    }
    process(older);
    compactor.end_cycle();
    process(newer);
    compactor.end_cycle();
    compactor.end_cycle();  // the older cycle's frees are now past the window, the newer not

    RunBuilder allocating;
    allocating.thread(1, 50);
    for (uint64_t i = 0; i < kCount; ++i) allocating.alloc(60, 8, kA + 32 * i, 1).alloc(60, 16, kA + 32 * i + 16, 1);
    process(allocating);
    EXPECT_EQ(freed_sizes.size(), kCount);
    EXPECT_TRUE(std::all_of(freed_sizes.begin(), freed_sizes.end(), [](uint64_t size) { return size == 16; }));
    EXPECT_EQ(compactor.live_allocations(), kCount);
}

// When aging leaves few pending frees in a large table, the table is rebuilt smaller; the
// frees still waiting must survive that.
TEST_F(TraceCompactorTest, PendingFreesSurviveTheirTableShrinking) {
    RunBuilder many, last;
    many.thread(2, 100);
    for (uint64_t i = 0; i < 5000; ++i) many.free(200 + i, kA + 64 * i);
    process(many);
    compactor.end_cycle();
    constexpr uint64_t kFar = 0x7f1000000000;  // apart from the 5000 addresses
    last.thread(3, 100).free(9000, kFar);
    process(last);
    compactor.end_cycle();
    compactor.end_cycle();  // the 5000 expire; the last free is one cycle younger and stays

    RunBuilder allocating;
    allocating.thread(1, 50).alloc(60, 8, kA, 1).alloc(70, 24, kFar, 1);
    process(allocating);
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{24}));
    EXPECT_EQ(compactor.live_allocations(), 1u);
}

TEST_F(TraceCompactorTest, PendingFreeDoesNotEndAnAllocationMadeAfterIt) {
    RunBuilder freeing;
    freeing.thread(2, 100).free(200, kA);
    process(freeing);

    RunBuilder later;
    later.thread(1, 250).alloc(300, 16, kA, 1);
    EXPECT_EQ(kinds(process(later)), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact}));
    EXPECT_TRUE(freed_sizes.empty());
    EXPECT_EQ(compactor.live_allocations(), 1u);
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

TEST_F(TraceCompactorTest, ReusedAddressAcrossThreadsWithRunsOutOfTimeOrderMatchesByTime) {
    // Real order: t1 allocates A (10), t2 frees it (20), t2 allocates A again (30), frees it (40).
    // Thread 2's run reaches the compactor first.
    RunBuilder t2;
    t2.thread(2, 15).free(20, kA).alloc(30, 300, kA, 2).free(40, kA);
    process(t2);
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{300}));

    RunBuilder t1;
    t1.thread(1, 5).alloc(10, 100, kA, 1);
    process(t1);
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{300, 100}));
    EXPECT_EQ(compactor.live_allocations(), 0u);
}

TEST_F(TraceCompactorTest, FreeEndsTheLatestAllocationAtItsAddressNotAFutureOne) {
    // Real order: t1 allocates A (10) and frees it (20); t2 then allocates A (30) and keeps it.
    // Thread 2's run arrives first, so at the time of t1's free two allocations are live at A.
    RunBuilder t2;
    t2.thread(2, 25).alloc(30, 300, kA, 2);
    process(t2);

    RunBuilder t1;
    t1.thread(1, 5).alloc(10, 100, kA, 1).free(20, kA);
    process(t1);
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{100}));
    EXPECT_EQ(compactor.live_allocations(), 1u);

    RunBuilder t2_later;
    t2_later.thread(2, 45).free(50, kA);
    process(t2_later);
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{100, 300}));
    EXPECT_EQ(compactor.live_allocations(), 0u);
}

TEST_F(TraceCompactorTest, FreeEndsTheAllocationBeforeItWhenTheFutureOneArrivedSecond) {
    // Same real order as above, but t1's allocation reaches the compactor before t2's and its
    // free only in a later run: the choice must go by time, not by which entry came last.
    RunBuilder t1_alloc;
    t1_alloc.thread(1, 5).alloc(10, 100, kA, 1);
    process(t1_alloc);
    RunBuilder t2;
    t2.thread(2, 25).alloc(30, 300, kA, 2);
    process(t2);

    RunBuilder t1_free;
    t1_free.thread(1, 15).free(20, kA);
    process(t1_free);
    EXPECT_EQ(freed_sizes, (std::vector<uint64_t>{100}));
    EXPECT_EQ(compactor.live_allocations(), 1u);
}

TEST_F(TraceCompactorTest, LargeClockMoveWritesTimeRecordSmallOneDoesNot) {
    constexpr uint64_t kBase = 1'000'000;
    constexpr uint64_t kJump = uint64_t{1} << 20;  // well above the time quantum
    RunBuilder run;
    run.thread(1, kBase).alloc(kBase + 100, 8, kA, 1).alloc(kBase + 100 + kJump, 16, kB, 1);
    std::vector<OutRecord> out = process(run);
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact, RecordKind::Time,
                                                   RecordKind::AllocCompact}));
    EXPECT_EQ(format::zigzag_decode(out[2].a), static_cast<int64_t>(100 + kJump));
    EXPECT_EQ(out[3].a, 16u);
}

// Times are written to a quantum only, except where they cross the start of shutdown: a free
// made a few ticks after exit began must be read as after it, one made before as before.
TEST_F(TraceCompactorTest, TimeCrossingTheExitIsWrittenExactlyBothWays) {
    constexpr uint64_t kBase = 1'000'000;
    compactor.mark_exit(kBase + 50);
    RunBuilder run;
    run.thread(1, kBase).alloc(kBase + 10, 8, kA, 1).free(kBase + 60, kA);
    run.thread(2, kBase).alloc(kBase + 20, 16, kB, 1);  // another thread's run, before the exit
    std::vector<OutRecord> out = process(run);
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact, RecordKind::Time,
                                                   RecordKind::FreeCompact, RecordKind::Thread,
                                                   RecordKind::AllocCompact}));
    EXPECT_EQ(format::zigzag_decode(out[2].a), 60);  // from the run's base, exactly to the free
    // Without an exit mark the same small moves write no Time record.
    compactor.reset();
    sizes.clear();
    RunBuilder plain;
    plain.thread(1, kBase).alloc(kBase + 10, 8, kA, 1).free(kBase + 60, kA);
    EXPECT_EQ(kinds(process(plain)), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::AllocCompact,
                                                              RecordKind::FreeCompact}));
}

// Attach mode sees the program's free() of blocks libc allocated itself (strdup) but not the
// allocations, so one address collects frees that never match: they are kept to a few per
// address, and a million of them take no longer than a million matched events.
TEST_F(TraceCompactorTest, UnmatchedFreesOfOneAddressStayFewAndCheap) {
    constexpr uint64_t kEvents = 1000000;
    RunBuilder runs;
    runs.thread(1, 0);
    for (uint64_t i = 0; i < kEvents; ++i) runs.free(10 + i, kA + 64 * (i % 4));
    runs.alloc(20 + kEvents, 8, kB, 1);
    for (uint64_t i = 0; i < kEvents; ++i) runs.alloc(30 + kEvents + i, 8, kB, 1);  // frees of these are lost too
    auto start = std::chrono::steady_clock::now();
    compactor.process(runs.bytes().data(), runs.bytes().size(), [](const uint8_t*, size_t) {});
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 2.0);
    EXPECT_LE(compactor.live_allocations(), 8u);
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

// --- sampled traces (issue #12) ---

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
    ASSERT_EQ(kinds(out), (std::vector<RecordKind>{RecordKind::Thread, RecordKind::Time, RecordKind::AllocCompact,
                                                   RecordKind::CacheInsert}));
    EXPECT_EQ((kBase + static_cast<uint64_t>(format::zigzag_decode(out[1].a))) % kGrid, 0u);
    EXPECT_EQ(format::zigzag_decode(out[3].a), 0) << "at the run's written time";
}

}  // namespace
}  // namespace growtrace::preload
