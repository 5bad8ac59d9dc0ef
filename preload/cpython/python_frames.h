// CPython stacks in the hot path: the calling thread's Python frames (read through the
// version's layout, cpython/), and a small id for each (code object, line) a stack goes
// through. Works unchanged in processes without Python: then every capture is empty.
#pragma once

#include <cstdint>

#include "format/records.h"
#include "preload/cpython/frames.h"
#include "preload/cpython/interpreter.h"
#include "preload/capture/stack_tree.h"

namespace growtrace::preload::python {

// A thread's memo of (code object, instruction) -> id lookups.
using LocationMemo = StackTreeMemo<1024>;

// Finds the interpreter (cpython/interpreter.h) and makes the tables frame ids live in, once;
// false where there is no CPython growtrace reads.
bool prepare();
// Undoes prepare() before the library is unloaded (a first attach that failed): the
// interpreter's code object destructor put back, the tables unmapped.
void release();

// The calling thread's Python frames, innermost first, if it runs Python and holds the GIL
// (only then are its frames stable). 0 otherwise.
int capture(FrameRef* frames, int max_frames);

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

// The PyFrame record of a newly interned location (its strings are the code object's, alive
// while the frame runs).
format::records::PyFrame frame_record(uint32_t id, const FrameRef& frame);

// Forget ids (forked child, new attach).
void reset();

}  // namespace growtrace::preload::python
