// What the tracer keeps of a Python stack, whatever the interpreter's version: a frame is a
// code object and an instruction in it. Filled by the version's frame walker (frame_walker.h).
#pragma once

#include <cstdint>

namespace growtrace::preload::python {

inline constexpr int kMaxPythonFrames = 96;

struct FrameRef {
    const void* code;  // PyCodeObject*, alive while its frame is on the stack
    int32_t offset;    // instruction index (in code units) in the code object
    bool entry;        // first frame of one C-level evaluation loop call
    uint16_t generation;  // of the code object's address (code_generation.h)
};

// The same place in the same code (whether the frame is an entry frame does not matter).
inline bool same_location(const FrameRef& a, const FrameRef& b) {
    return a.code == b.code && a.offset == b.offset && a.generation == b.generation;
}

// A thread's last Python-only stack, outermost frame first, kept to capture the next one
// against it.
struct StackMemory {
    int count = 0;
    FrameRef frames[kMaxPythonFrames] = {};
    const void* addresses[kMaxPythonFrames] = {};     // of the interpreter frames
    uintptr_t instructions[kMaxPythonFrames] = {};    // their last instruction, as the version keeps it
    const void* below = nullptr;                      // what the outermost frame's caller was
    bool cut = false;  // the stack was deeper than kMaxPythonFrames: only its innermost are here
    uint64_t code_objects_freed = 0;  // by the process when it was captured (code_generation.h)
};

}  // namespace growtrace::preload::python
