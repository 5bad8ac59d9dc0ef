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

// Finds the interpreter's symbols. Cheap to call again; false if this is not CPython 3.11.
bool probe();
bool present();
// Py_IsInitialized(), false where there is no CPython 3.11.
bool initialized();

// The calling thread's Python frames, innermost first, if it runs Python and holds the GIL
// (only then are its frames stable and may code objects be referenced). 0 otherwise.
int capture(FrameRef* frames, int max_frames);

// The same, compared on the way with a previous capture stored outermost first: where the two
// have the same depth, `innermost_change` is the innermost-first index of the outermost frame
// that differs (-1: none), which saves a second pass over both. Meaningless where depths differ.
int capture_compared(FrameRef* frames, int max_frames, const FrameRef* previous, int previous_count,
                     int& innermost_change);

// Is ip inside the evaluation loop, whose native frames stand for Python frames?
bool is_eval_frame(uint64_t ip);

// Id of a frame location; `created` when the caller must write the PyFrame record.
uint32_t intern(const FrameRef& frame, LocationMemo& memo, bool& created);

// Encodes the PyFrame record for a newly interned location.
void encode_frame(uint32_t id, const FrameRef& frame, format::RecordEncoder& out);

// Forget ids (forked child).
void reset();

}  // namespace growtrace::preload::python
