// The frame walker, written once for every interpreter version: each version_3XX.cpp
// instantiates FrameWalker<Its traits> with the few accessors that differ, and these loops are
// then compiled against that version's own structures (no indirect call per frame).
//
// A version's traits provide:
//   using Frame                           the interpreter's frame type
//   kFramesOrdered                        frames live in a stack that grows upwards, so a frame
//                                         below another has a lower address (3.11+); false when
//                                         frames are heap objects (3.10)
//   current(tstate)                       the innermost frame of a thread state, or null
//   thread_id(tstate)                     the pthread id the state belongs to
//   previous(frame), code(frame)          the next frame in the chain, the code object
//   is_shim(frame)                        a frame that stands for no Python code (3.12+: the
//                                         entry shim each evaluation loop call pushes)
//   instruction(frame)                    the frame's position as the version keeps it (for
//                                         comparing: it changes whenever the frame moves on)
//   location(frame, out)                  fills a FrameRef; false for frames to leave out (not
//                                         started yet, or the C-stack shims of 3.12+)
//
// Safety: only the calling thread's frames are read, and only while it holds the GIL; every
// remembered frame is read only after its place in the live chain has been confirmed.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "preload/cpython/code_generation.h"
#include "preload/cpython/frames.h"
#include "preload/cpython/layout.h"

namespace growtrace::preload::python {

template <class V>
struct FrameWalker {
    using Frame = typename V::Frame;

    // The frames of the calling thread if it holds the GIL, innermost first; null otherwise.
    // The thread holding the GIL, if it is this one: then its frames are stable and its code
    // objects may be read. The state's thread id answers cheaply; a state made in one thread
    // and used in another (embedders) needs the slower lookup.
    static const Frame* current_frame() {
        void* mine = g_thread_state_access.gil_holder();
        if (!mine) return nullptr;
        if (V::thread_id(mine) != static_cast<unsigned long>(pthread_self()) &&
            mine != g_thread_state_access.this_thread_state())
            return nullptr;
        return V::current(mine);
    }

    // The Python frame that called f, past any shim.
    static const Frame* caller_of(const Frame* f) {
        do f = V::previous(f);
        while (f && V::is_shim(f));
        return f;
    }

    static int capture(FrameRef* frames, int max_frames) {
        int count = 0;
        for (const Frame* f = current_frame(); f && count < max_frames; f = V::previous(f))
            if (V::location(f, frames[count])) ++count;
        return count;
    }

    // The frames of `memory` from `from` down to the outermost still form the thread's stack
    // below it, unchanged: each one's caller is the next one remembered, at the same code and
    // instruction. The loads take their addresses from memory, not from each other, so they
    // do not wait in turn. Once a code object has been freed since the stack was remembered, a
    // frame may run a new code object at a dead one's address (code compiled at run time, in a
    // loop): then the code's generation must be the remembered one too.
    static bool unchanged_below(const StackMemory& memory, int from, bool codes_freed) {
        for (int m = from; m > 0; --m) {
            auto* f = static_cast<const Frame*>(memory.addresses[m]);
            auto* caller = static_cast<const Frame*>(memory.addresses[m - 1]);
            const FrameRef& remembered = memory.frames[m - 1];
            if (caller_of(f) != caller || V::code(caller) != remembered.code ||
                V::instruction(caller) != memory.instructions[m - 1] ||
                (codes_freed && code_generation(remembered.code) != remembered.generation))
                return false;
        }
        return caller_of(static_cast<const Frame*>(memory.addresses[0])) == memory.below;
    }

    static void remember(StackMemory& memory, int i, const FrameRef& frame, const Frame* f) {
        memory.frames[i] = frame;
        memory.addresses[i] = f;
        memory.instructions[i] = V::instruction(f);
    }

    // Makes a whole new capture (innermost first) the remembered stack; `shared` is how many
    // of its outermost frames the previous one had too.
    static int adopt(StackMemory& memory, const FrameRef* frames, const Frame* const* addresses, int count,
                     const void* below, int& shared) {
        int k = 0;
        while (k < count && k < memory.count && same_location(memory.frames[k], frames[count - 1 - k])) ++k;
        shared = k;
        for (int i = k; i < count; ++i) remember(memory, i, frames[count - 1 - i], addresses[count - 1 - i]);
        memory.below = below;
        memory.cut = below && count == kMaxPythonFrames;
        memory.count = count;
        return count;
    }

    // Where frame f stands in the remembered stack, or -1. With ordered frames a cursor moves
    // down as the walk does (remembered frames above f are gone); otherwise the remembered
    // addresses are searched from the innermost.
    static int remembered_index(const StackMemory& memory, int& cursor, const Frame* f) {
        auto here = reinterpret_cast<uintptr_t>(f);
        if constexpr (V::kFramesOrdered) {
            // Across two chunks of the frame stack the order may not hold; the walk then simply
            // goes on to the bottom, slower but as exact.
            while (cursor >= 0 && reinterpret_cast<uintptr_t>(memory.addresses[cursor]) > here) --cursor;
            return cursor >= 0 && reinterpret_cast<uintptr_t>(memory.addresses[cursor]) == here ? cursor : -1;
        } else {
            for (int m = memory.count - 1; m >= 0; --m)
                if (reinterpret_cast<uintptr_t>(memory.addresses[m]) == here) return m;
            return -1;
        }
    }

    static int capture_since(StackMemory& memory, int& shared, bool& confirmed) {
        confirmed = false;
        // Code objects are freed only under the GIL, which this thread holds for the walk.
        const uint64_t freed = code_objects_freed();
        const bool codes_freed = freed != memory.code_objects_freed;
        memory.code_objects_freed = freed;
        FrameRef fresh[kMaxPythonFrames];  // walked frames, innermost first
        const Frame* fresh_addresses[kMaxPythonFrames];
        int n = 0;
        int cursor = memory.count - 1;
        bool try_shortcut = true;  // one confirmation per capture: a failed one means a full walk
        const Frame* f = current_frame();
        for (; f && n < kMaxPythonFrames; f = V::previous(f)) {
            if (!V::location(f, fresh[n])) continue;
            int j = try_shortcut ? remembered_index(memory, cursor, f) : -1;
            if (j >= 0 && same_location(memory.frames[j], fresh[n])) {
                try_shortcut = false;
                // Under a cut stack, frames beyond the cut would move up into a shallower one.
                bool fits = memory.cut ? j + 1 + n == kMaxPythonFrames : j + 1 + n <= kMaxPythonFrames;
                if (fits && unchanged_below(memory, j, codes_freed)) {
                    shared = j + 1;
                    for (int i = 0; i < n; ++i) remember(memory, shared + i, fresh[n - 1 - i], fresh_addresses[n - 1 - i]);
                    memory.count = shared + n;
                    confirmed = true;
                    return memory.count;
                }
            }
            fresh_addresses[n++] = f;
        }
        while (f && V::is_shim(f)) f = V::previous(f);  // below, as caller_of() sees it
        return adopt(memory, fresh, fresh_addresses, n, f, shared);
    }
};

}  // namespace growtrace::preload::python
