// CPython 3.11 support in the hot path: reading the calling thread's Python frames and giving
// each (code object, instruction) a small id. Everything here is resolved at run time with
// dlsym, so the library works unchanged in processes without Python, and with a Python built
// as a shared library or linked into its executable (which exports the same symbols).
#pragma once

#include <cstdint>

#include "format/record_encoder.h"
#include "preload/stack_tree.h"

namespace growtrace::preload::python {

inline constexpr int kMaxPythonFrames = 96;

// A thread's memo of (code object, instruction) -> id lookups.
using LocationMemo = StackTreeMemo<1024>;

struct FrameRef {
    const void* code;  // PyCodeObject*, kept alive once interned
    int32_t offset;    // instruction index in the code object
    bool entry;        // first frame of one C-level evaluation loop call
};

// The same place in the same code (whether the frame is an entry frame does not matter).
inline bool same_location(const FrameRef& a, const FrameRef& b) { return a.code == b.code && a.offset == b.offset; }

// Finds the interpreter's symbols. Cheap to call again; false if this is not CPython 3.11.
bool probe();
bool present();
// Py_IsInitialized(), false where there is no CPython 3.11.
bool initialized();

// The calling thread's Python frames, innermost first, if it runs Python and holds the GIL
// (only then are its frames stable and may code objects be referenced). 0 otherwise.
int capture(FrameRef* frames, int max_frames);

// A thread's last Python-only stack, outermost frame first, kept to capture the next one
// against it.
struct StackMemory {
    int count = 0;
    FrameRef frames[kMaxPythonFrames] = {};
    const void* addresses[kMaxPythonFrames] = {};  // of the interpreter frames
    const void* instructions[kMaxPythonFrames] = {};  // their last instruction, as a pointer
    const void* below = nullptr;                   // what the outermost frame's caller was
    bool cut = false;  // the stack was deeper than kMaxPythonFrames: only its innermost are here
};

// Captures the calling thread's Python frames (as capture()) against `memory`, its previous
// stack, and updates it: frames [0, shared) of the new stack, outermost first, are the
// previous stack's; frames [shared, count) are in memory.frames now. Returns count.
//
// A stack mostly differs from the previous one in its innermost frames. Those are walked
// until a frame of the previous stack shows up, at the same address and instruction; the
// frames below it are then confirmed (same links, code and instruction) from the addresses
// remembered, loads that do not wait for each other, unlike a walk along the links.
int capture_since(StackMemory& memory, int& shared);

// For tests: capture_since() then also walks the whole stack and counts the captures that
// differ from it; report_verification() logs the counts (at the end of tracing).
void verify_stacks(bool on);
void report_verification();
// Is ip inside the evaluation loop, whose native frames stand for Python frames?
bool is_eval_frame(uint64_t ip);

// Id of a frame location; `created` when the caller must write the PyFrame record.
uint32_t intern(const FrameRef& frame, LocationMemo& memo, bool& created);

// Encodes the PyFrame record for a newly interned location.
void encode_frame(uint32_t id, const FrameRef& frame, format::RecordEncoder& out);

// Forget ids (forked child).
void reset();

}  // namespace growtrace::preload::python
