// The CPython cache and class verdicts, on synthetic record sequences (1 tick = 1 ns here).
#include <gtest/gtest.h>

#include "format/trace_format.h"

#include "analyzer/model/python_caches.h"

#include <algorithm>
#include <cmath>

namespace growtrace {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

double seconds(uint64_t ticks) { return static_cast<double>(ticks) / kSecond; }

CacheCreateRecord cache(uint64_t id, int64_t maxsize) {
    CacheCreateRecord r;
    r.cache_id = id;
    r.maxsize = maxsize;
    r.module = "app";
    r.qualname = "build";
    r.creator_file = "app.py";
    r.creator_line = 12;
    r.bound_names = {"app.cached_build"};
    return r;
}

// The start of a miss (thread `tid`), as the tracker saw it.
CacheInsertRecord miss_begin(PythonTracker& t, uint64_t cache_id, uint64_t seq, uint64_t ticks, uint64_t entries_before,
                             std::vector<uint64_t> key_types = {}, const std::string& key_desc = "(int,)",
                             uint64_t tid = 1) {
    CacheInsertRecord begin;
    begin.tid = tid;
    begin.ticks = ticks;
    begin.cache_id = cache_id;
    begin.insert_seq = seq;
    begin.stack_id = 7;
    begin.entries_before = entries_before;
    begin.key_desc = key_desc;
    begin.key_type_addresses = std::move(key_types);
    t.on_cache_insert(begin);
    return begin;
}

// The end of that miss: its value stored at `ticks`.
void miss_stored(PythonTracker& t, const CacheInsertRecord& begin, uint64_t ticks) {
    CacheInsertRecord stored = begin;
    stored.phase = CacheInsertRecord::Stored;
    stored.ticks = ticks;
    t.on_cache_insert(stored);
}

// One miss: begin, an allocation computed for the entry, stored.
void miss(PythonTracker& t, uint64_t cache_id, uint64_t seq, uint64_t ticks, uint64_t entries_before,
          uint64_t alloc_seq, std::vector<uint64_t> key_types = {}, const std::string& key_desc = "(int,)") {
    CacheInsertRecord begin = miss_begin(t, cache_id, seq, ticks, entries_before, std::move(key_types), key_desc);
    t.on_alloc_compact(AllocCompactEvent{1, ticks + 1, 1000, 3, alloc_seq});
    miss_stored(t, begin, ticks + 2);
}

TEST(PythonCaches, CacheFilledThroughoutTheRunIsAFindingWithItsMemoryAndKeyTypes) {
    PythonTracker t;
    t.on_cache_create(cache(1, -1));
    for (uint64_t i = 0; i < 100; ++i) {
        TypeCreateRecord type;
        type.tid = 1;
        type.ticks = i * kSecond / 25;
        type.address = 0x1000 + i * 0x100;  // a fresh class per request
        type.module = "app";
        type.qualname = "Parsed[Fact]";
        type.allocation_seq = 10'000 + i;
        t.on_type_create(type);
        miss(t, 1, i + 1, i * kSecond / 25 + 10, i, i + 1, {type.address});
    }
    PythonFindings f = t.finish(seconds, 4.0);
    ASSERT_EQ(f.caches.size(), 1u);
    const CacheFinding& c = f.caches[0];
    EXPECT_TRUE(c.unbounded) << c.reason;
    EXPECT_EQ(c.name, "app.cached_build");
    EXPECT_EQ(c.location, "app.py:12");
    EXPECT_EQ(c.insertions, 100u);
    EXPECT_EQ(c.entries_last, 100u);
    EXPECT_EQ(c.retained_bytes, 100u * 1000u);
    EXPECT_EQ(c.inserted_from_stack, 7u);
    ASSERT_EQ(c.key_types.size(), 1u);
    EXPECT_EQ(c.key_types[0].name, "app.Parsed[Fact]");
    EXPECT_EQ(c.key_types[0].distinct_classes, 100u);
    EXPECT_EQ(c.key_types[0].live_classes, 100u);
    ASSERT_FALSE(f.types.empty());
    EXPECT_TRUE(f.types[0].unbounded) << f.types[0].reason;
    EXPECT_EQ(f.types[0].live_at_end, 100u);
}

// The first keys a cache sees are often not the ones that keep missing: the example shown is
// one naming the class that keeps coming back under new identities.
TEST(PythonCaches, ExampleKeyNamesTheClassThatKeepsMissing) {
    PythonTracker t;
    t.on_cache_create(cache(1, -1));
    for (uint64_t i = 0; i < 100; ++i) {
        uint64_t ticks = i * kSecond / 25 + 10;
        if (i < 10) {
            miss(t, 1, i + 1, ticks, i, i + 1, {}, "(str, int)");
            continue;
        }
        TypeCreateRecord type;
        type.tid = 1;
        type.ticks = ticks - 5;
        type.address = 0x1000 + i * 0x100;
        type.module = "app";
        type.qualname = "Parsed[Fact]";
        t.on_type_create(type);
        miss(t, 1, i + 1, ticks, i, i + 1, {type.address}, "(typing.Union[app.Parsed[Fact], NoneType],)");
    }
    PythonFindings f = t.finish(seconds, 4.0);
    ASSERT_EQ(f.caches.size(), 1u);
    const CacheFinding& c = f.caches[0];
    ASSERT_EQ(c.example_keys.size(), 2u);
    EXPECT_EQ(c.example_keys[0], "(typing.Union[app.Parsed[Fact], NoneType],)");
    EXPECT_EQ(c.example_keys[1], "(str, int)");
}

TEST(PythonCaches, FullBoundedCacheIsNotAFindingHoweverMuchItHolds) {
    PythonTracker t;
    t.on_cache_create(cache(2, 64));
    for (uint64_t i = 0; i < 1000; ++i) {
        miss(t, 2, i + 1, i * kSecond / 250, i < 64 ? i : 64, i + 1);
        if (i >= 64) t.on_free_compact(FreeCompactEvent{1, i * kSecond / 250 + 3, i + 1 - 64});  // eviction
    }
    PythonFindings f = t.finish(seconds, 4.0);
    ASSERT_EQ(f.caches.size(), 1u);
    EXPECT_FALSE(f.caches[0].unbounded);
    EXPECT_NE(f.caches[0].reason.find("maxsize"), std::string::npos) << f.caches[0].reason;
    EXPECT_EQ(f.caches[0].retained_bytes, 64u * 1000u);
}

TEST(PythonCaches, CacheThatFillsAtStartThenOnlyHitsIsNotAFinding) {
    PythonTracker t;
    t.on_cache_create(cache(3, -1));
    for (uint64_t i = 0; i < 256; ++i) miss(t, 3, i + 1, i * kSecond / 1000, i, i + 1);
    PythonFindings f = t.finish(seconds, 4.0);  // the run goes on for 4 s of hits
    ASSERT_EQ(f.caches.size(), 1u);
    EXPECT_FALSE(f.caches[0].unbounded) << f.caches[0].reason;
    EXPECT_EQ(f.caches[0].entries_last, 256u);
}

// One miss whose entry holds `bytes` (one allocation).
void big_miss(PythonTracker& t, uint64_t cache_id, uint64_t n, double at_s, uint64_t bytes) {
    const auto ticks = static_cast<uint64_t>(at_s * kSecond);
    CacheInsertRecord begin = miss_begin(t, cache_id, n, ticks, n - 1);
    t.on_alloc_compact(AllocCompactEvent{1, ticks + 1, bytes, 3, n});
    miss_stored(t, begin, ticks + 2);
}

// A gunicorn worker's openai cache (Pool.GunicornWorkersWithTheFixGiveNoFinding, failed once
// with both cores busy): 10 keys in the first request, then the response types of later
// requests, one or two at a time, 4 in all. Each quarter gained an entry, but the second half
// of the work only 3: a finite set of keys being found out.
TEST(PythonCaches, AFewNewKeysMetLateAreNotGrowth) {
    PythonTracker t;
    t.on_cache_create(cache(4, -1));
    uint64_t n = 0;
    for (int i = 0; i < 10; ++i) big_miss(t, 4, ++n, 0.01 * i, 100'000);
    for (double at : {1.2, 2.2, 3.1, 3.9}) big_miss(t, 4, ++n, at, 100'000);
    PythonFindings f = t.finish(seconds, 4.0);
    ASSERT_EQ(f.caches.size(), 1u);
    EXPECT_FALSE(f.caches[0].unbounded) << f.caches[0].reason;
    EXPECT_NE(f.caches[0].reason.find("3 of its 14 entries came in the second half"), std::string::npos)
        << f.caches[0].reason;
}

// The rule above leaves slow, steady growth alone: 12 entries, one every third of a second.
TEST(PythonCaches, ASlowCacheGainingEntriesEvenlyIsStillAFinding) {
    PythonTracker t;
    t.on_cache_create(cache(5, -1));
    for (uint64_t n = 1; n <= 12; ++n) big_miss(t, 5, n, 0.33 * static_cast<double>(n), 100'000);
    PythonFindings f = t.finish(seconds, 4.0);
    ASSERT_EQ(f.caches.size(), 1u);
    EXPECT_TRUE(f.caches[0].unbounded) << f.caches[0].reason;
}

// The report keeps only the first caches that are not findings: at equal memory (none here,
// as in a sampled trace that caught none), a cache that could grow without limit comes first,
// then the fuller ones.
TEST(PythonCaches, CachesWithoutMemoryAreListedUnlimitedFirstThenFullest) {
    PythonTracker t;
    t.on_cache_create(cache(4, 128));
    t.on_cache_create(cache(5, -1));
    t.on_cache_create(cache(6, 128));
    uint64_t seq = 0;
    auto fill = [&](uint64_t id, uint64_t entries) {
        for (uint64_t i = 0; i < entries; ++i) {
            const uint64_t ticks = (++seq) * kSecond / 100;
            miss_stored(t, miss_begin(t, id, seq, ticks, i), ticks + 1);
        }
    };
    fill(6, 1);
    fill(4, 3);
    fill(5, 2);
    PythonFindings f = t.finish(seconds, 4.0);
    ASSERT_EQ(f.caches.size(), 3u);
    EXPECT_EQ(f.caches[0].maxsize, -1);
    EXPECT_EQ(f.caches[1].entries_last, 3u);
    EXPECT_EQ(f.caches[2].entries_last, 1u);
}

TEST(PythonCaches, ClassesCreatedAndDroppedAreNotDuplicateTypes) {
    PythonTracker t;
    for (uint64_t i = 0; i < 500; ++i) {
        TypeCreateRecord type;
        type.tid = 1;
        type.ticks = i * kSecond / 100;
        type.address = 0x5000;
        type.module = "app";
        type.qualname = "Payload";
        type.allocation_seq = i + 1;
        t.on_type_create(type);
        t.on_free_compact(FreeCompactEvent{1, type.ticks + 5, i + 1});
    }
    PythonFindings f = t.finish(seconds, 5.0);
    ASSERT_EQ(f.types.size(), 1u);
    EXPECT_FALSE(f.types[0].unbounded) << f.types[0].reason;
    EXPECT_EQ(f.types[0].created, 500u);
    EXPECT_EQ(f.types[0].live_at_end, 0u);
}

// --- sampled traces ---

// In a sampled trace the allocations made while computing an entry are samples: the cache's
// memory is their weights' sum (size / p each), with its standard error; a weightless record (a
// class object followed for its free only) adds nothing. Insertions and entries stay exact.
TEST(PythonCaches, SampledMissesGiveTheCacheAnEstimateOfItsMemory) {
    constexpr uint64_t kPeriod = 512 * 1024;
    PythonTracker t;
    t.set_sample_period(kPeriod);
    t.on_cache_create(cache(1, -1));
    uint64_t seq = 0;
    for (uint64_t i = 0; i < 100; ++i) {
        CacheInsertRecord begin = miss_begin(t, 1, i + 1, i * kSecond / 25, i);
        if (i % 4 == 0) t.on_alloc_compact(AllocCompactEvent{1, begin.ticks + 1, 1000, 3, ++seq});  // a sample
        t.on_alloc_compact(AllocCompactEvent{1, begin.ticks + 1, 0, 0, ++seq});  // weightless
        miss_stored(t, begin, begin.ticks + 2);
    }
    PythonFindings f = t.finish(seconds, 4.0);
    ASSERT_EQ(f.caches.size(), 1u);
    const CacheFinding& c = f.caches[0];
    EXPECT_TRUE(c.unbounded) << c.reason;
    EXPECT_EQ(c.insertions, 100u);
    EXPECT_EQ(c.entries_last, 100u);
    const double p = -std::expm1(-1000.0 / kPeriod);
    EXPECT_EQ(c.retained_samples, 25u);
    EXPECT_NEAR(static_cast<double>(c.retained_bytes), 25 * 1000 / p, 1);
    EXPECT_NEAR(c.retained_bytes_stderr, std::sqrt(25 * (1 - p)) * 1000 / p, 1);
    EXPECT_NEAR(static_cast<double>(c.live_allocations), 25 / p, 1);
    EXPECT_EQ(t.live_cache_bytes(1, 3), c.retained_bytes);
}

// Entries keep rising, but no sample landed in the entries' memory: whether they hold 64 KB
// cannot be told, and the cache says so instead of being called small.
TEST(PythonCaches, GrowingCacheWithoutLiveSamplesIsUndetermined) {
    PythonTracker t;
    t.set_sample_period(512 * 1024);
    t.on_cache_create(cache(1, -1));
    for (uint64_t i = 0; i < 100; ++i) {
        CacheInsertRecord begin = miss_begin(t, 1, i + 1, i * kSecond / 25, i);
        miss_stored(t, begin, begin.ticks);
    }
    PythonFindings f = t.finish(seconds, 4.0);
    ASSERT_EQ(f.caches.size(), 1u);
    EXPECT_FALSE(f.caches[0].unbounded);
    EXPECT_TRUE(f.caches[0].undetermined);
    EXPECT_NE(f.caches[0].reason.find("too thinly sampled"), std::string::npos) << f.caches[0].reason;
    // In a full trace the same cache holds nothing: not a finding, and not undetermined.
    PythonTracker full;
    full.on_cache_create(cache(1, -1));
    for (uint64_t i = 0; i < 100; ++i) {
        miss_begin(full, 1, i + 1, i * kSecond / 25, i);
    }
    PythonFindings ff = full.finish(seconds, 4.0);
    EXPECT_FALSE(ff.caches[0].undetermined);
    EXPECT_NE(ff.caches[0].reason.find("holds only"), std::string::npos) << ff.caches[0].reason;
}

// A busy cache over a long run: its entry-count series is thinned, not kept point by point,
// and still gives the right first and last counts.
TEST(PythonCaches, LongRunKeepsTheEntrySeriesBounded) {
    PythonTracker t;
    t.on_cache_create(cache(1, 128));
    for (uint64_t i = 0; i < 200000; ++i) {
        CacheInsertRecord begin = miss_begin(t, 1, i + 1, i * 1000, std::min<uint64_t>(i, 128), {}, "(int,)", 1 + i % 7);
        miss_stored(t, begin, begin.ticks + 1);
    }
    PythonFindings f = t.finish(seconds, 0.2);
    ASSERT_EQ(f.caches.size(), 1u);
    EXPECT_LE(f.caches[0].entries_over_time.size(), 8200u);
    EXPECT_EQ(f.caches[0].entries_first, 0u);
    EXPECT_EQ(f.caches[0].entries_last, 129u);
    EXPECT_EQ(f.caches[0].insertions, 200000u);
}

// A sampled trace's writer counts the misses of a cache with a maxsize (CacheMisses) instead of
// writing them, except those during which a sample was made. The figures the report gives for
// the cache must be those the misses written one by one would have given.
TEST(PythonCaches, CountedMissesOfABoundedCacheGiveTheSameFiguresAsTheMissesThemselves) {
    PythonTracker per_miss, counted;
    per_miss.set_sample_period(512 * 1024);
    counted.set_sample_period(512 * 1024);
    for (PythonTracker* t : {&per_miss, &counted}) t->on_cache_create(cache(1, 128));
    // 400 misses over 4 s from two stacks and two threads; one in 25 computes a sample.
    CacheMissesRecord window;
    uint64_t alloc_seq = 0, entries = 0, window_end = kSecond;
    auto flush_window = [&] {
        if (!window.caches.empty()) counted.on_cache_misses(window);
        window = CacheMissesRecord{};
        window.ticks = window_end;
    };
    for (uint64_t i = 0; i < 400; ++i) {
        const uint64_t ticks = 1000 + i * kSecond / 100;
        if (ticks >= window_end) {
            flush_window();
            window_end += kSecond;
        }
        const uint64_t tid = 1 + i % 2, stack = i % 3 ? 7 : 8;
        const bool stored = i % 10 != 9;  // some raise
        CacheInsertRecord begin;
        begin.tid = tid;
        begin.ticks = ticks;
        begin.cache_id = 1;
        begin.insert_seq = i + 1;
        begin.stack_id = stack;
        begin.entries_before = entries;
        CacheInsertRecord end = begin;
        end.phase = stored ? CacheInsertRecord::Stored : CacheInsertRecord::Raised;
        end.ticks = ticks + 5;
        const bool sampled = i % 25 == 0;
        std::vector<PythonTracker*> one_by_one{&per_miss};
        if (sampled) one_by_one.push_back(&counted);  // the writer writes that one in full
        if (sampled) ++alloc_seq;
        for (PythonTracker* t : one_by_one) {
            t->on_cache_insert(begin);
            if (sampled) t->on_alloc_compact(AllocCompactEvent{tid, ticks + 1, 2000, 3, alloc_seq});
            t->on_cache_insert(end);
        }
        if (!sampled) {
            if (window.caches.empty()) {
                window.caches.emplace_back();
                window.caches[0].cache_id = 1;
                window.caches[0].first_ticks = ticks;
                window.caches[0].first_entries_before = entries;
            }
            CacheMissCounts& m = window.caches[0];
            ++m.misses;
            m.stored += stored;
            m.last_ticks = ticks;
            m.last_entries_after = entries + stored;
            auto s = std::find_if(m.stacks.begin(), m.stacks.end(), [&](const auto& p) { return p.first == stack; });
            if (s == m.stacks.end()) m.stacks.emplace_back(stack, 1);
            else ++s->second;
        }
        if (stored && entries < 128) ++entries;
        if (i == 150) {  // an entry freed: the sample of miss 0 is no longer held
            for (PythonTracker* t : {&per_miss, &counted}) t->on_free_compact(FreeCompactEvent{1, ticks + 2, 1});
        }
    }
    flush_window();
    for (PythonTracker* t : {&per_miss, &counted}) {
        CacheSizeRecord size;
        size.ticks = 4 * kSecond + 10;
        size.entries = {{1, static_cast<int64_t>(entries)}};
        t->on_cache_size(size);
    }
    PythonFindings a = per_miss.finish(seconds, 4.5), b = counted.finish(seconds, 4.5);
    ASSERT_EQ(a.caches.size(), 1u);
    ASSERT_EQ(b.caches.size(), 1u);
    const CacheFinding &x = a.caches[0], &y = b.caches[0];
    EXPECT_EQ(x.insertions, 400u);
    EXPECT_EQ(y.insertions, x.insertions);
    EXPECT_EQ(y.entries_first, x.entries_first);
    EXPECT_EQ(y.entries_last, x.entries_last);
    EXPECT_EQ(x.entries_last, 128u);
    EXPECT_EQ(y.inserted_from_stack, x.inserted_from_stack);
    EXPECT_EQ(x.inserted_from_stack, 7u);
    EXPECT_DOUBLE_EQ(y.started_at_s, x.started_at_s);
    EXPECT_GT(x.retained_bytes, 0u);
    EXPECT_EQ(y.retained_bytes, x.retained_bytes);
    EXPECT_EQ(y.live_allocations, x.live_allocations);
    EXPECT_EQ(y.retained_samples, x.retained_samples);
    EXPECT_EQ(x.retained_samples, 15u);
    EXPECT_FALSE(x.unbounded);
    EXPECT_FALSE(y.unbounded);
    EXPECT_EQ(y.reason, x.reason);
    EXPECT_EQ(y.growth_entries_per_s, x.growth_entries_per_s);
}

// Nothing recorded after the shutdown mark decides: a size record of a torn-down module's cache
// (0 entries), taken during the interpreter's shutdown, leaves a growing cache growing.
TEST(PythonCaches, SizesAfterTheShutdownMarkDecideNothing) {
    PythonTracker t;
    t.on_cache_create(cache(1, -1));
    for (uint64_t i = 0; i < 200; ++i) miss(t, 1, i + 1, i * kSecond / 50, i, i + 1);
    t.set_exit_ticks(4 * kSecond);
    CacheSizeRecord torn_down;
    torn_down.ticks = 4 * kSecond + 1000;
    torn_down.entries = {{1, 0}};
    t.on_cache_size(torn_down);
    PythonFindings f = t.finish(seconds, 4.2);
    ASSERT_EQ(f.caches.size(), 1u);
    EXPECT_TRUE(f.caches[0].unbounded) << f.caches[0].reason;
    EXPECT_EQ(f.caches[0].entries_last, 200u);
    EXPECT_EQ(f.caches[0].teardown_at_s, 0);
}

// cache_clear() at the end of the work (before the mark): judged on the run before, with what it
// held then, and said to be released at teardown. A cache destroyed then is the same.
TEST(PythonCaches, CacheEmptiedAtTheEndOfTheWorkIsJudgedOnTheRunBefore) {
    for (const int64_t last : {int64_t{0}, int64_t{-1}}) {
        PythonTracker t;
        t.on_cache_create(cache(1, -1));
        for (uint64_t i = 0; i < 200; ++i) miss(t, 1, i + 1, i * kSecond / 50, i, i + 1);
        for (uint64_t i = 0; i < 200; ++i) t.on_free_compact(FreeCompactEvent{1, 4 * kSecond + 10 + i, i + 1});
        CacheSizeRecord emptied;
        emptied.ticks = 4 * kSecond + 500;
        emptied.entries = {{1, last}};
        t.on_cache_size(emptied);
        t.set_exit_ticks(4 * kSecond + 1000);
        PythonFindings f = t.finish(seconds, 4.0);
        ASSERT_EQ(f.caches.size(), 1u);
        const CacheFinding& c = f.caches[0];
        EXPECT_TRUE(c.unbounded) << c.reason;
        EXPECT_EQ(c.retained_bytes, 0u);
        EXPECT_EQ(c.entries_before_teardown, 200u);
        EXPECT_EQ(c.released_at_teardown_bytes, 200u * 1000u);
        EXPECT_NEAR(c.teardown_at_s, 4.0, 0.01);
    }
}

// A sampled trace times a free to its quantum, rounded down (format::kSampledTimeQuantumTicks),
// an insertion exactly: a cache_clear() right after the last insertion shows its frees a little
// before that insertion. The samples it freed are still the ones the cache held before its
// teardown, and what they held is what it released.
TEST(PythonCaches, SampledClearRightAfterTheLastInsertionIsATeardownOfWhatItHeld) {
    constexpr uint64_t kPeriod = 512 * 1024;
    PythonTracker t;
    t.set_sample_period(kPeriod);
    t.on_cache_create(cache(1, -1));
    uint64_t seq = 0;
    uint64_t last_ticks = 0;
    for (uint64_t i = 0; i < 200; ++i) {
        CacheInsertRecord begin = miss_begin(t, 1, i + 1, i * kSecond / 50, i);
        t.on_alloc_compact(AllocCompactEvent{1, begin.ticks + 1, 100000, 3, ++seq});  // a sample per miss
        miss_stored(t, begin, begin.ticks + 2);
        last_ticks = begin.ticks + 2;
    }
    // The clear, 1 ms after the last insertion: its frees on the quantum's grid, before it.
    const uint64_t grid = static_cast<uint64_t>(format::kSampledTimeQuantumTicks);
    const uint64_t freed_at = (last_ticks + kSecond / 1000) / grid * grid - grid;
    ASSERT_LT(freed_at, last_ticks);
    for (uint64_t s = 1; s <= seq; ++s) t.on_free_compact(FreeCompactEvent{1, freed_at, s});
    CacheSizeRecord emptied;
    emptied.ticks = last_ticks + kSecond / 1000 + 100;
    emptied.entries = {{1, 0}};
    t.on_cache_size(emptied);
    t.set_exit_ticks(last_ticks + kSecond / 100);
    PythonFindings f = t.finish(seconds, seconds(last_ticks + kSecond / 100));
    ASSERT_EQ(f.caches.size(), 1u);
    const CacheFinding& c = f.caches[0];
    EXPECT_TRUE(c.unbounded) << c.reason;
    EXPECT_EQ(c.entries_before_teardown, 200u);
    EXPECT_GT(c.released_at_teardown_bytes, 150u * 100000u);
}

// A cache gaining an entry per request, with the program stalled for 6 of its 10 seconds (no
// work at all): judged by the clock its entries stop rising for the middle quarters; judged by
// the program's work, which is what fills it, they never do.
TEST(PythonCaches, AStalledProgramsCacheIsJudgedOnItsWork) {
    for (const bool by_work : {false, true}) {
        PythonTracker t;
        t.on_cache_create(cache(1, -1));
        for (uint64_t i = 0; i < 200; ++i) {
            const uint64_t ticks = i < 100 ? i * kSecond / 50 : 8 * kSecond + (i - 100) * kSecond / 50;
            miss(t, 1, i + 1, ticks, i, i + 1);
        }
        // Work done by a time: one unit per second while it runs, none while it is stopped.
        if (by_work) t.set_work_clock([](double s) { return s < 2 ? s : s < 8 ? 2 : s - 6; });
        PythonFindings f = t.finish(seconds, 10.0);
        ASSERT_EQ(f.caches.size(), 1u);
        EXPECT_EQ(f.caches[0].unbounded, by_work) << f.caches[0].reason;
        EXPECT_NEAR(f.caches[0].growth_entries_per_s, 20, 1) << "rates stay per second";
    }
}

// Classes made and dropped in batches: the live count at the quarter ends may well rise, but
// the fewest alive in each quarter do not. A population that is kept does rise.
TEST(PythonCaches, DuplicateTypesNeedALivePopulationThatKeepsGrowing) {
    for (const bool kept : {false, true}) {
        PythonTracker t;
        uint64_t seq = 1;
        std::vector<uint64_t> open;
        for (uint64_t i = 0; i < 3000; ++i) {
            const uint64_t ticks = i * kSecond / 1000;
            t.on_alloc_compact(AllocCompactEvent{1, ticks, 900, 5, seq});
            TypeCreateRecord type;
            type.tid = 1;
            type.ticks = ticks + 1;
            type.address = 0x10000 + i * 0x400;
            type.module = "lib";
            type.qualname = "Schema";
            type.allocation_seq = seq;
            t.on_type_create(type);
            // Batches of 4 to 34, dropped when full; the last one stays alive.
            open.push_back(seq++);
            if (!kept && open.size() >= 4 + 30 * i / 3000 && i < 2980) {
                for (uint64_t s : open) t.on_free_compact(FreeCompactEvent{1, ticks + 2, s});
                open.clear();
            }
        }
        PythonFindings f = t.finish(seconds, 3.0);
        ASSERT_EQ(f.types.size(), 1u);
        EXPECT_EQ(f.types[0].unbounded, kept) << f.types[0].reason;
        EXPECT_GE(f.types[0].live_at_end, kMinDuplicateLiveClasses);
    }
}

}  // namespace
}  // namespace growtrace
