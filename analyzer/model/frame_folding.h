// Folding the interpreter's own machinery out of merged Python/native stacks, for reports.
// A CPython stack interleaves each Python frame with the evaluation loop and call plumbing of
// libpython (_PyEval_Vector, _PyObject_MakeTpCall, ...), which says nothing about where the
// memory goes. What stays: every Python frame, every native frame outside the interpreter
// (C extensions, Rust, libc), the interpreter frames below the innermost Python frame (what
// allocated: dict resize, type creation...), and the lru_cache wrappers, which are where
// caches insert.
#pragma once

#include <vector>

#include "analyzer/model/symbolizer.h"

namespace growtrace {

// A frame of Python code (the agent's frames carry the module name "python").
bool is_python_frame(const Frame& f);

// Innermost first, as recorded. Stacks without Python frames are left as they are.
std::vector<Frame> fold_interpreter_frames(const std::vector<Frame>& frames);

}  // namespace growtrace
