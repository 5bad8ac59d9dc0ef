// The fast path of native stack capture: the calling thread's stack walked with the rules of
// its modules' call frame information (call_frame_info.h), each rule looked up once and then
// kept in a table by address. It gives the same frames as libunwind's unw_backtrace where
// every frame has a rule it understands, and gives up (-1) anywhere else, where the caller
// unwinds with libunwind: a frame without unwind information, a signal frame, a CFA computed by
// an expression, a stack that does not go up.
#pragma once

#include <cstdint>

namespace growtrace::preload {

inline constexpr int kMaxWalkFrames = 136;

// Where a walk may start instead of its own frame: an interposed function's return address and
// frame address (__builtin_frame_address(0), which gives the function a frame pointer: its
// caller's rbp is saved there and its CFA is 16 bytes above). The tracer's own frames between
// the hook and the walk are then never walked. frame 0: start here.
struct WalkStart {
    uint64_t return_address = 0;
    uint64_t frame = 0;
};

// A thread's previous walk, so that the next one can stop where the stacks meet. Consecutive
// allocations of a thread share the outer part of their stacks: once the walk reaches a frame
// with the registers of one of the previous walk's (ip, rsp, rbp), and every stack word the
// previous walk read from there up still holds what it read, the rest of the walk would read the
// same words at the same addresses with the same rules: it is the previous walk's rest.
struct WalkMemo {
    struct Frame {
        uint64_t ip, rsp, rbp;
        int32_t ra_offset;   // from the next frame's rsp (this frame's CFA)
        int32_t rbp_offset;  // the same for the caller's saved rbp; 0 where it is not saved
    };
    Frame frames[2][kMaxWalkFrames] = {};  // the previous walk and the one under way
    int count[2] = {0, 0};
    bool complete[2] = {false, false};  // reached the outermost frame
    bool exact_first[2] = {false, false};  // frame 0 is the walk's own (its ip is no return address)
    int current = 0;
    uint32_t generation = 0;  // of the rules it was made with (cfi_forget_rules)
};

// Whether the stack words a walk read from frame `from` up (each frame's return address and
// saved rbp, at its offsets from the next frame's rsp) still hold what it read.
bool walk_memo_still_holds(const WalkMemo::Frame* frames, int from, int count);

// Instruction pointers of the calling thread's frames, innermost (this function's own) first:
// the count stored, at most max_frames (<= kMaxWalkFrames), or -1 when libunwind must do it.
// `memo` is the calling thread's own, or null.
int cfi_backtrace(uint64_t* ips, int max_frames, WalkMemo* memo, WalkStart start = {});

// Forgets every rule: after a library is unloaded, another may be mapped at its addresses.
void cfi_forget_rules();

// Whether the fast path is used (GROWTRACE_UNWIND=libunwind turns it off, for comparisons).
void cfi_set_enabled(bool enabled);
bool cfi_enabled();

}  // namespace growtrace::preload
