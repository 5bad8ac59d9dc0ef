// Telling code objects apart without keeping them alive. A frame is identified by its code
// object's address, but code compiled at run time is freed and its address reused by the next
// one; holding a reference to every code object seen would change what the program keeps.
// Instead each address (hashed into one of 1M buckets) has a generation, bumped whenever a
// code object at such an address is freed: (address, generation) names one code object for
// its whole life. A collision (a code object dies in the bucket of one still running) gives
// the live one a new id the next time its frame is walked: the same frame then has two ids,
// which the analyzer merges by their names; the buckets are many (2 MiB, touched only by
// CPython processes) to keep that rare.
#pragma once

#include <atomic>
#include <cstdint>

namespace growtrace::preload::python {

inline constexpr unsigned kCodeGenerationBuckets = 1u << 20;
inline std::atomic<uint16_t> g_code_generations[kCodeGenerationBuckets];

inline std::atomic<uint16_t>& code_generation_bucket(const void* code) {
    auto a = reinterpret_cast<uintptr_t>(code);
    return g_code_generations[((a >> 4) ^ (a >> 24)) & (kCodeGenerationBuckets - 1)];
}

inline uint16_t code_generation(const void* code) {
    return code_generation_bucket(code).load(std::memory_order_relaxed);
}

// How many code objects the process has freed: while it has not moved, every code object a
// remembered stack names is still the one it was (frame_walker.h confirms stacks by address).
inline std::atomic<uint64_t> g_code_objects_freed{0};

inline uint64_t code_objects_freed() { return g_code_objects_freed.load(std::memory_order_relaxed); }

// The code object at `code` is being freed: its address will name a new one.
inline void note_code_object_freed(const void* code) {
    code_generation_bucket(code).fetch_add(1, std::memory_order_relaxed);
    g_code_objects_freed.fetch_add(1, std::memory_order_relaxed);
}

// Puts a function in front of the interpreter's code object destructor (PyCode_Type's
// tp_dealloc) that bumps the generation before the memory is given back. present() only;
// stays in place for the life of the process, unless a first attach fails and the library is
// unloaded: unwatch_code_objects() then puts the interpreter's destructor back.
bool watch_code_objects();
void unwatch_code_objects();

}  // namespace growtrace::preload::python
