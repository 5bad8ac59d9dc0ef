// The Python frame walker's incremental capture (preload/cpython/frame_walker.h), run on
// a stack of fake interpreter frames: whatever changed between two captures, the one that
// confirms part of the remembered stack must give what a full walk gives.
#include <gtest/gtest.h>
#include <pthread.h>

#include "preload/cpython/frame_walker.h"

namespace growtrace::preload::python {

namespace {

struct FakeFrame {
    const FakeFrame* previous = nullptr;
    const void* code = nullptr;
    int32_t offset = 0;
};

// The one fake thread state: its innermost frame, and the thread it belongs to.
struct FakeThread {
    const FakeFrame* top = nullptr;
    unsigned long id = 0;
};
FakeThread g_thread;

void* fake_gil_holder() { return &g_thread; }
void* fake_this_thread_state() { return &g_thread; }

struct FakeTraits {
    using Frame = FakeFrame;
    static constexpr bool kFramesOrdered = true;
    static const Frame* current(void* tstate) { return static_cast<FakeThread*>(tstate)->top; }
    static unsigned long thread_id(void* tstate) { return static_cast<FakeThread*>(tstate)->id; }
    static const Frame* previous(const Frame* f) { return f->previous; }
    static bool is_shim(const Frame*) { return false; }
    static const void* code(const Frame* f) { return f->code; }
    static uintptr_t instruction(const Frame* f) { return reinterpret_cast<uintptr_t>(f->code) + 2 * f->offset; }
    static bool location(const Frame* f, FrameRef& out) {
        out = {f->code, f->offset, false, code_generation(f->code)};
        return true;
    }
};

using Walker = FrameWalker<FakeTraits>;

// Stand-ins for code objects: only their addresses matter.
alignas(64) char g_outer_code[64], g_template_code[64], g_leaf_code[64], g_unrelated_code[64];

class FrameWalkerTest : public ::testing::Test {
protected:
    void SetUp() override {
        g_thread_state_access = {fake_gil_holder, fake_this_thread_state};
        g_thread.id = static_cast<unsigned long>(pthread_self());
        // Frames grow upwards, as in CPython 3.11+: outer, a frame of code compiled at run
        // time, and the leaf that allocates.
        frames_[0] = {nullptr, g_outer_code, 5};
        frames_[1] = {&frames_[0], g_template_code, 3};
        frames_[2] = {&frames_[1], g_leaf_code, 7};
        g_thread.top = &frames_[2];
    }

    // Captures against `memory_` and checks the result, outermost first, against a full walk.
    bool capture_matches_full_walk(bool& confirmed) {
        int shared = 0;
        int count = Walker::capture_since(memory_, shared, confirmed);
        FrameRef full[kMaxPythonFrames];
        int full_count = Walker::capture(full, kMaxPythonFrames);
        if (count != full_count) return false;
        for (int k = 0; k < count; ++k) {
            const FrameRef& a = memory_.frames[k];
            const FrameRef& b = full[count - 1 - k];
            if (!same_location(a, b)) return false;
        }
        return true;
    }

    FakeFrame frames_[3];
    StackMemory memory_;
};

TEST_F(FrameWalkerTest, AStackWhoseInnermostFrameMovedOnIsConfirmedFromMemory) {
    bool confirmed = true;
    ASSERT_TRUE(capture_matches_full_walk(confirmed));
    EXPECT_FALSE(confirmed) << "nothing remembered yet";
    frames_[2].offset = 9;
    ASSERT_TRUE(capture_matches_full_walk(confirmed));
    EXPECT_TRUE(confirmed);
}

// The frame below the leaf runs a new code object at the address of the one freed since the
// last capture, at the same instruction: same address, same position, another code object.
TEST_F(FrameWalkerTest, ACodeObjectFreedAndReplacedAtItsAddressBelowTheLeafIsNotConfirmed) {
    bool confirmed = false;
    ASSERT_TRUE(capture_matches_full_walk(confirmed));
    const uint16_t before = code_generation(g_template_code);
    note_code_object_freed(g_template_code);
    ASSERT_NE(code_generation(g_template_code), before);
    ASSERT_TRUE(capture_matches_full_walk(confirmed)) << "the remembered frame kept the dead code object's generation";
    EXPECT_FALSE(confirmed);
    EXPECT_EQ(memory_.frames[1].generation, code_generation(g_template_code));
}

// A code object freed elsewhere changes nothing of this stack: the shortcut still holds.
TEST_F(FrameWalkerTest, ACodeObjectFreedElsewhereLeavesTheShortcut) {
    bool confirmed = false;
    ASSERT_TRUE(capture_matches_full_walk(confirmed));
    note_code_object_freed(g_unrelated_code);
    ASSERT_TRUE(capture_matches_full_walk(confirmed));
    EXPECT_TRUE(confirmed);
}

}  // namespace

ThreadStateAccess g_thread_state_access;

}  // namespace growtrace::preload::python
