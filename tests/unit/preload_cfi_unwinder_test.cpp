// The tracer's own stack walk (preload/capture/cfi_unwinder.h) against libunwind's unw_backtrace, the
// reference it must equal frame for frame, on stacks of every shape the rules allow: deep
// recursion, frames addressed from rbp (alloca), frame-pointer code, threads; and the walk's
// memo of the previous stack, which must never hand out a stack that is not the current one.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <alloca.h>
#include <csignal>

#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "preload/capture/call_frame_info.h"
#include "preload/capture/cfi_unwinder.h"

namespace growtrace::preload {
namespace {

using Backtrace = int (*)(void**, int);

Backtrace reference() {
    static Backtrace fn = [] {
        void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
        return lib ? reinterpret_cast<Backtrace>(dlsym(lib, "unw_backtrace")) : nullptr;
    }();
    return fn;
}

struct Captured {
    std::vector<uint64_t> walk;       // ours, from the capturing function's caller up
    std::vector<uint64_t> expected;   // libunwind's, the same part
    bool gave_up = false;             // ours returned -1
};

std::vector<uint64_t> from(const uint64_t* ips, int n, uint64_t caller) {
    for (int i = 0; i < n; ++i)
        if (ips[i] == caller) return {ips + i, ips + n};
    return {};
}

WalkMemo* g_memo = nullptr;  // the memo of the running test (one thread at a time)
bool g_from_caller = false;  // start the walk at capture_here's caller, as the hooks do

// Both walks from one frame: the parts above this function's caller must be equal.
__attribute__((noinline)) Captured capture_here() {
    Captured c;
    uint64_t ours[kMaxWalkFrames];
    void* theirs[kMaxWalkFrames];
    auto caller = reinterpret_cast<uint64_t>(__builtin_return_address(0));
    WalkStart start;
    if (g_from_caller) start = {caller, reinterpret_cast<uint64_t>(__builtin_frame_address(0))};
    int n = cfi_backtrace(ours, kMaxWalkFrames, g_memo, start);
    int m = reference()(theirs, kMaxWalkFrames);
    c.gave_up = n < 0;
    if (n > 0) c.walk = from(ours, n, caller);
    c.expected = from(reinterpret_cast<uint64_t*>(theirs), m, caller);
    asm volatile("" ::: "memory");
    return c;
}

// Stack shapes. Each keeps its frame (the volatile sink) so that no call becomes a jump.
volatile uint64_t g_sink;

__attribute__((noinline)) Captured recurse(int depth) {
    if (depth == 0) return capture_here();
    Captured c = recurse(depth - 1);
    g_sink = g_sink + 1;
    return c;
}

__attribute__((noinline)) Captured with_alloca(size_t bytes, int depth) {
    auto* room = static_cast<volatile char*>(alloca(bytes));
    room[0] = 1;
    Captured c = depth ? with_alloca(bytes / 2 + 16, depth - 1) : capture_here();
    g_sink = g_sink + room[0];
    return c;
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) Captured with_frame_pointer(int depth) {
    Captured c = depth ? with_frame_pointer(depth - 1) : recurse(2);
    g_sink = g_sink + 1;
    return c;
}

// Two paths of the same shape to one function: the frames at the bottom sit at the same
// addresses with the same return addresses; only the words further up tell the paths apart.
__attribute__((noinline)) Captured shared_bottom() {
    Captured c = capture_here();
    g_sink = g_sink + 1;
    return c;
}
template <int Path>
__attribute__((noinline)) Captured path_to_shared_bottom() {
    Captured c = shared_bottom();
    g_sink = g_sink + Path;
    return c;
}
constexpr auto path_a = path_to_shared_bottom<1>;
constexpr auto path_b = path_to_shared_bottom<2>;

void expect_same(const Captured& c) {
    ASSERT_FALSE(c.gave_up);
    ASSERT_GT(c.expected.size(), 2u);
    EXPECT_EQ(c.walk, c.expected);
}

class CfiUnwinder : public ::testing::Test {
protected:
    void SetUp() override {
        if (!reference()) GTEST_SKIP() << "libunwind.so.8 not found";
        cfi_set_enabled(true);
        g_memo = nullptr;
        g_from_caller = false;
    }
    void TearDown() override {
        g_memo = nullptr;
        g_from_caller = false;
    }
};

TEST_F(CfiUnwinder, DeepRecursionIsWalkedAsLibunwindWalksIt) {
    for (int depth : {0, 1, 7, 40, 100}) expect_same(recurse(depth));
}

TEST_F(CfiUnwinder, FramesAddressedFromRbpAreWalked) {
    for (size_t bytes : {16, 100, 5000}) expect_same(with_alloca(bytes, 3));
    expect_same(with_frame_pointer(4));
}

TEST_F(CfiUnwinder, AWalkStartedAtTheHooksCallerGivesTheSameFrames) {
    g_from_caller = true;
    expect_same(recurse(5));
    expect_same(with_alloca(300, 2));
}

TEST_F(CfiUnwinder, OtherThreadsAreWalkedToTheirOutermostFrame) {
    Captured c;
    std::thread([&] { c = recurse(6); }).join();
    expect_same(c);
}

TEST_F(CfiUnwinder, TheWalkStopsAtMaxFrames) {
    uint64_t ips[8];
    EXPECT_EQ(cfi_backtrace(ips, 8, nullptr), 8);
}

TEST_F(CfiUnwinder, TheWalkCanBeTurnedOff) {
    uint64_t ips[8];
    cfi_set_enabled(false);
    EXPECT_EQ(cfi_backtrace(ips, 8, nullptr), -1);
    cfi_set_enabled(true);
}

// The walk gives up on a signal frame (libunwind takes over in the tracer).
Captured g_in_handler;
void handler(int) { g_in_handler = recurse(1); }

TEST_F(CfiUnwinder, ASignalFrameIsLeftToLibunwind) {
    struct sigaction action{}, old{};
    action.sa_handler = handler;
    sigaction(SIGUSR1, &action, &old);
    raise(SIGUSR1);
    sigaction(SIGUSR1, &old, nullptr);
    EXPECT_TRUE(g_in_handler.gave_up);
}

TEST_F(CfiUnwinder, TheMemoTellsPathsOfTheSameShapeApart) {
    auto memo = std::make_unique<WalkMemo>();
    g_memo = memo.get();
    for (int i = 0; i < 50; ++i) {
        Captured a = path_a();
        expect_same(a);
        Captured b = path_b();
        expect_same(b);
        ASSERT_NE(a.walk, b.walk);
    }
}

TEST_F(CfiUnwinder, TheMemoNeverHandsOutAStackThatIsNotTheCurrentOne) {
    auto memo = std::make_unique<WalkMemo>();
    g_memo = memo.get();
    std::mt19937 random(12345);
    for (int i = 0; i < 3000; ++i) {
        g_from_caller = random() % 2;
        switch (random() % 5) {
            case 0: expect_same(recurse(static_cast<int>(random() % 12))); break;
            case 1: expect_same(with_alloca(16 + random() % 4000, static_cast<int>(random() % 3))); break;
            case 2: expect_same(path_a()); break;
            case 3: expect_same(path_b()); break;
            default: expect_same(with_frame_pointer(static_cast<int>(random() % 4))); break;
        }
        if (HasFatalFailure()) return;
    }
}

TEST_F(CfiUnwinder, ForgottenRulesLeaveTheMemoUnused) {
    auto memo = std::make_unique<WalkMemo>();
    g_memo = memo.get();
    expect_same(recurse(3));
    cfi_forget_rules();
    expect_same(recurse(3));
    expect_same(recurse(3));
}

// Two frames over a stack of our own: the callee saved the caller's rbp and its return address
// just below the caller's rsp.
TEST_F(CfiUnwinder, TheMemoChecksEverySavedRbpAsWellAsEveryReturnAddress) {
    uint64_t stack[4] = {0x7000 /* saved rbp */, 0x401234 /* return address */, 0, 0};
    auto caller_rsp = reinterpret_cast<uint64_t>(&stack[2]);
    WalkMemo::Frame frames[2] = {{0x400100, caller_rsp - 64, 0x1, -8, -16}, {0x401234, caller_rsp, 0x7000, 0, 0}};
    EXPECT_TRUE(walk_memo_still_holds(frames, 0, 2));
    stack[0] = 0x7010;  // the caller's frame is elsewhere now, its return address the same
    EXPECT_FALSE(walk_memo_still_holds(frames, 0, 2));
    stack[0] = 0x7000;
    stack[1] = 0x401300;
    EXPECT_FALSE(walk_memo_still_holds(frames, 0, 2));
    frames[0].rbp_offset = 0;  // rbp not saved by the callee: only the return address counts
    stack[1] = 0x401234;
    stack[0] = 0x9999;
    EXPECT_TRUE(walk_memo_still_holds(frames, 0, 2));
}

// --- the rules read from call frame instructions ---

// The CIE of GCC's x86-64 code: CFA = rsp + 8, return address at CFA - 8.
const uint8_t kCie[] = {0x0c, 0x07, 0x08, 0x90, 0x01};

FrameRule rule_at(const std::vector<uint8_t>& fde, uintptr_t offset) {
    return rule_from_instructions(kCie, kCie + sizeof kCie, fde.data(), fde.data() + fde.size(), 1, -8, 16, 0x1000,
                                  0x1000 + offset);
}

TEST(CallFrameInfo, AFramePointerPrologueMovesTheCfaToRbp) {
    // push %rbp; mov %rsp,%rbp: def_cfa_offset 16, offset rbp at CFA-16, def_cfa_register rbp.
    std::vector<uint8_t> fde = {0x41, 0x0e, 0x10, 0x86, 0x02, 0x43, 0x0d, 0x06};
    FrameRule entry = rule_at(fde, 0);
    EXPECT_EQ(entry.kind, FrameRule::Step);
    EXPECT_FALSE(entry.cfa_from_rbp);
    EXPECT_EQ(entry.cfa_offset, 8);
    EXPECT_FALSE(entry.rbp_saved);
    FrameRule pushed = rule_at(fde, 1);
    EXPECT_EQ(pushed.cfa_offset, 16);
    EXPECT_TRUE(pushed.rbp_saved);
    EXPECT_EQ(pushed.rbp_offset, -16);
    FrameRule body = rule_at(fde, 10);
    EXPECT_TRUE(body.cfa_from_rbp);
    EXPECT_EQ(body.cfa_offset, 16);
    EXPECT_EQ(body.ra_offset, -8);
}

TEST(CallFrameInfo, RestoreStateBringsBackTheRememberedRowWithItsCfa) {
    // push (cfa 16); remember; at +4 an early return pops (cfa 8); restore at +5 (cfa 16 again).
    std::vector<uint8_t> fde = {0x41, 0x0e, 0x10, 0x43, 0x0a, 0x0e, 0x08, 0x41, 0x0b};
    EXPECT_EQ(rule_at(fde, 2).cfa_offset, 16);
    EXPECT_EQ(rule_at(fde, 4).cfa_offset, 8);
    EXPECT_EQ(rule_at(fde, 6).cfa_offset, 16);
}

TEST(CallFrameInfo, ACfaExpressionIsUnsupported) {
    std::vector<uint8_t> fde = {0x41, 0x0f, 0x02, 0x77, 0x08};  // def_cfa_expression (rsp + 8)
    EXPECT_EQ(rule_at(fde, 0).kind, FrameRule::Step);
    EXPECT_EQ(rule_at(fde, 2).kind, FrameRule::Unsupported);
}

TEST(CallFrameInfo, AnUndefinedReturnAddressIsTheOutermostFrame) {
    std::vector<uint8_t> fde = {0x07, 0x10};  // undefined r16
    EXPECT_EQ(rule_at(fde, 0).kind, FrameRule::Outermost);
}

TEST(CallFrameInfo, RbpKeptInAnotherRegisterIsUnsupported) {
    std::vector<uint8_t> fde = {0x09, 0x06, 0x03};  // register rbp in rbx
    EXPECT_EQ(rule_at(fde, 0).kind, FrameRule::Unsupported);
}

TEST(CallFrameInfo, AnUnknownOpcodeIsUnsupported) {
    std::vector<uint8_t> fde = {0x3f};
    EXPECT_EQ(rule_at(fde, 0).kind, FrameRule::Unsupported);
}

}  // namespace
}  // namespace growtrace::preload
