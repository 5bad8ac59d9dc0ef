// The thread registry's epoch: a new trace (fork, attach) never waits for a thread that holds
// its state, and records written for the earlier trace never reach the new one.
#include "preload/record/thread_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "preload/support/clock.h"
#include "preload/support/trace_state.h"

namespace growtrace::preload {

// What the registry calls in the rest of the library, which this test leaves out.
void unwinder_close_for_fork() {}
void unwinder_wait_for(const std::atomic<int>&) {}
void unwinder_open_after_fork() {}
namespace python {
bool g_present = false;
}  // namespace python

namespace {

std::vector<Buffer*> g_taken;
struct Note {
    uint32_t stream;
    uint64_t caught_up_to;
    bool gone;
};
std::vector<Note> g_notes;
void take(Buffer* b) { g_taken.push_back(b); }
void note(uint32_t stream, uint64_t caught_up_to, bool gone) { g_notes.push_back({stream, caught_up_to, gone}); }
constexpr CollectSink kSink{take, note};

const Note* note_of(uint32_t stream) {
    for (const Note& n : g_notes)
        if (n.stream == stream) return &n;
    return nullptr;
}

struct ThreadRegistryTest : ::testing::Test {
    static void SetUpTestSuite() { ASSERT_TRUE(thread_registry_init()); }
    void SetUp() override {
        g_taken.clear();
        g_notes.clear();
    }
};

// A state of this thread with `bytes` of records in its buffer, locked.
ThreadState* state_with_records(size_t bytes) {
    ThreadState* ts = lock_my_state();
    if (!ts->buffer) ts->buffer = pool_get();
    ts->buffer->stream = ts->stream;
    memset(ts->buffer->data, 0x11, bytes);
    ts->buffer->used = bytes;
    return ts;
}

TEST_F(ThreadRegistryTest, ANewTraceDoesNotWaitForAThreadInTheMiddleOfAnEvent) {
    std::atomic<bool> locked{false}, release{false};
    std::thread holder([&] {
        ThreadState* ts = state_with_records(100);
        locked = true;
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        unlock(ts);
    });
    while (!locked) std::this_thread::yield();
    std::atomic<bool> reset_done{false};
    std::thread resetter([&] {
        thread_registry_reset(SessionOrigin::Attached);
        reset_done = true;
    });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!reset_done && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(reset_done) << "the new trace waited for the thread in the middle of an event";
    release = true;
    holder.join();
    if (!reset_done) resetter.detach();  // it would wait for ever: leave it behind
    else resetter.join();
}

TEST_F(ThreadRegistryTest, RecordsOfTheEarlierTraceAreNotTakenForTheNewOne) {
    ThreadState* ts = state_with_records(200);
    Buffer* old = ts->buffer;
    unlock(ts);
    thread_registry_reset(SessionOrigin::Attached);
    thread_registry_collect(kSink);
    EXPECT_EQ(std::count(g_taken.begin(), g_taken.end(), old), 0);

    // The thread's next event starts from an empty buffer and forgotten stacks.
    ts = lock_my_state();
    EXPECT_TRUE(ts->buffer == nullptr || ts->buffer->used == 0);
    EXPECT_EQ(ts->stack.count, 0);
    unlock(ts);
}

TEST_F(ThreadRegistryTest, RecordsOfTheCurrentTraceAreTaken) {
    ThreadState* ts = state_with_records(300);
    Buffer* current = ts->buffer;
    unlock(ts);
    thread_registry_collect(kSink);
    ASSERT_EQ(g_taken.size(), 1u);
    EXPECT_EQ(g_taken[0], current);
    EXPECT_EQ(g_taken[0]->used, 300u);
    pool_put(current);
}

// The merge decides a free only once every thread has caught up with it (event_merger.h): a
// thread whose buffer was taken has caught up with the collection's time; events it writes
// later read a later time.
TEST_F(ThreadRegistryTest, AThreadCollectedHasCaughtUpWithTheCollection) {
    ThreadState* ts = state_with_records(50);
    const uint32_t stream = ts->stream;
    unlock(ts);
    const uint64_t before = event_ticks();
    thread_registry_collect(kSink);
    const Note* n = note_of(stream);
    ASSERT_NE(n, nullptr);
    EXPECT_GE(n->caught_up_to, before);
    EXPECT_FALSE(n->gone);
    EXPECT_LT(n->caught_up_to, event_ticks());
    for (Buffer* b : g_taken) pool_put(b);
}

// A thread in the middle of an event is waited for a moment, then left: its note then claims
// nothing it cannot prove (its events still in its buffer may be older than the collection).
TEST_F(ThreadRegistryTest, AThreadBusyThroughTheCollectionIsNotCaughtUp) {
    std::atomic<bool> locked{false}, release{false};
    std::atomic<uint32_t> stream{0};
    std::atomic<uint64_t> created{0};
    std::thread holder([&] {
        ThreadState* ts = state_with_records(100);
        stream = ts->stream;
        created = ts->created_ticks;
        locked = true;
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        unlock(ts);
    });
    while (!locked) std::this_thread::yield();
    thread_registry_collect(kSink);
    const Note* n = note_of(stream);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->caught_up_to, created.load());
    EXPECT_TRUE(g_taken.empty());
    release = true;
    holder.join();
}

// A thread blocked for a free buffer holds its state, but reads its next event's time only once
// it has one: it is caught up, and the writer, which it waits for, never waits for it.
TEST_F(ThreadRegistryTest, AThreadWaitingForABufferIsCaughtUpWithoutBeingWaitedFor) {
    std::atomic<bool> locked{false}, release{false};
    std::atomic<uint32_t> stream{0};
    std::thread holder([&] {
        ThreadState* ts = lock_my_state();
        stream = ts->stream;
        ts->awaiting_buffer.store(true);
        locked = true;
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ts->awaiting_buffer.store(false);
        unlock(ts);
    });
    while (!locked) std::this_thread::yield();
    const uint64_t before = event_ticks();
    thread_registry_collect(kSink);
    const Note* n = note_of(stream);
    ASSERT_NE(n, nullptr);
    EXPECT_GE(n->caught_up_to, before);
    release = true;
    holder.join();
}

// A thread that ended hands over its last buffer and is noted gone: nothing of it is awaited.
TEST_F(ThreadRegistryTest, AThreadThatEndedIsNotedGoneWithItsLastBuffer) {
    std::atomic<uint32_t> stream{0};
    std::thread worker([&] {
        ThreadState* ts = state_with_records(64);
        stream = ts->stream;
        unlock(ts);
    });
    worker.join();
    thread_registry_collect(kSink);
    const Note* n = note_of(stream);
    ASSERT_NE(n, nullptr);
    EXPECT_TRUE(n->gone);
    // Its buffer was queued full at its end (on_thread_exit), for the writer's full queue.
    const Buffer* last = nullptr;
    for (Buffer* b = pool_take_full(); b;) {
        Buffer* next = b->next;
        if (b->stream == stream.load()) last = b;
        else pool_put(b);
        b = next;
    }
    ASSERT_NE(last, nullptr);
    EXPECT_EQ(last->used, 64u);
    pool_put(const_cast<Buffer*>(last));
    for (Buffer* b : g_taken) pool_put(b);
}

}  // namespace
}  // namespace growtrace::preload
