// The thread registry's epoch: a new trace (fork, attach) never waits for a thread that holds
// its state, and records written for the earlier trace never reach the new one.
#include "preload/thread_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "preload/session.h"

namespace growtrace::preload {

// What the registry calls in the rest of the library, which this test leaves out.
constinit TraceSession g_session;
__thread bool t_in_tracer __attribute__((tls_model("initial-exec"))) = false;
void writer_note_main_thread_ended() {}
void unwinder_close_for_fork() {}
void unwinder_wait_for(const std::atomic<int>&) {}
void unwinder_open_after_fork() {}
namespace python {
bool present() { return false; }
}  // namespace python

namespace {

std::vector<Buffer*> g_taken;
void take(Buffer* b) { g_taken.push_back(b); }

struct ThreadRegistryTest : ::testing::Test {
    static void SetUpTestSuite() { ASSERT_TRUE(thread_registry_init()); }
    void SetUp() override { g_taken.clear(); }
};

// A state of this thread with `bytes` of records in its buffer, locked.
ThreadState* state_with_records(size_t bytes) {
    ThreadState* ts = lock_my_state();
    if (!ts->buffer) ts->buffer = pool_get();
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
    thread_registry_collect(take);
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
    thread_registry_collect(take);
    ASSERT_EQ(g_taken.size(), 1u);
    EXPECT_EQ(g_taken[0], current);
    EXPECT_EQ(g_taken[0]->used, 300u);
    pool_put(current);
}

}  // namespace
}  // namespace growtrace::preload
