// Compiled against CPython 3.11's internal headers for the layout of _PyInterpreterFrame,
// PyThreadState and PyCodeObject; nothing is linked. The layouts are stable within 3.11.x
// (3.11.2 from Debian and 3.11.7 from pyenv are both used here), and probe() refuses any
// other minor version.
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include "preload/python/python_frames.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>

#include <atomic>

#include <cstring>

#include "preload/log.h"
#include "preload/stack_tree.h"

namespace growtrace::preload::python {
namespace {

struct Api {
    int (*is_initialized)();
    PyThreadState* (*this_thread_state)();
    PyThreadState* (*gil_holder)();
    int (*addr_to_line)(PyCodeObject*, int);
    const char* (*utf8)(PyObject*, Py_ssize_t*);
    uint64_t eval_begin, eval_end;
};
Api g_api;
// A prologue is one instruction per cell and free variable, plus two in generators; frames
// further in need not be checked for one. (Only a function with more than six of those, caught
// allocating a cell in its prologue, would show a frame at its first line that CPython leaves
// out.)
constexpr int32_t kPrologueBound = 8;
bool g_present = false;
bool g_probed = false;
// A frame location is interned twice: (instruction offset, code object) -> location id, the
// key the hot path has, and (line, code object) -> frame id, the PyFrame the trace names.
// Several instructions of one line then share a frame, and the stacks through them a node.
StackTree g_locations;
StackTree g_frames;
std::atomic<uint32_t>* g_frame_of = nullptr;  // location id -> frame id, 0 = not known yet
size_t g_frame_of_bytes = 0;
// Up to 393K locations (3/4 of the slots). Lookups are hashed, so a long-running program
// touches every page: the tables are mapped at once, in huge pages (2 x 8 MiB).
constexpr unsigned kLocationsLog2 = 19;
constexpr StackTree::Options kLocationTables{StackTree::Layout::Hashed, true, true};

bool map_frame_of() {
    g_frame_of_bytes = sizeof(std::atomic<uint32_t>) << kLocationsLog2;
    void* mem = mmap(g_frame_of, g_frame_of_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (g_frame_of ? MAP_FIXED : 0), -1, 0);
    if (mem == MAP_FAILED) return false;
    madvise(mem, g_frame_of_bytes, MADV_POPULATE_WRITE);  // 2 MiB, touched all over: map it now
    g_frame_of = static_cast<std::atomic<uint32_t>*>(mem);
    return true;
}

template <typename F>
bool resolve(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
    return fn != nullptr;
}

bool find_eval_loop() {
    void* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
    if (!eval) return false;
    Dl_info info;
    void* entry = nullptr;
    if (!dladdr1(eval, &info, &entry, RTLD_DL_SYMENT) || !entry) return false;
    auto* sym = static_cast<const ElfW(Sym)*>(entry);
    g_api.eval_begin = reinterpret_cast<uint64_t>(eval);
    g_api.eval_end = g_api.eval_begin + sym->st_size;
    return sym->st_size > 0;
}

// Strings of code objects are almost always compact ASCII, whose bytes can be read in place;
// anything else goes through PyUnicode_AsUTF8AndSize (GIL held, recursion guard set).
const char* text_of(PyObject* s, Py_ssize_t& size) {
    size = 0;
    if (!s || !PyUnicode_Check(s)) return "";
    const char* t = g_api.utf8(s, &size);
    return t ? t : "";
}

}  // namespace

bool probe() {
    if (g_probed) return g_present;
    g_probed = true;
    const char* (*version)() = nullptr;
    if (!resolve(version, "Py_GetVersion")) return false;
    const char* v = version();
    if (strncmp(v, "3.11.", 5) != 0) {
        log_line("Python %.6s is not supported for Python stacks (3.11 only); native stacks only", v);
        return false;
    }
    bool ok = resolve(g_api.is_initialized, "Py_IsInitialized") &&
              resolve(g_api.this_thread_state, "PyGILState_GetThisThreadState") &&
              resolve(g_api.gil_holder, "_PyThreadState_UncheckedGet") &&
              resolve(g_api.addr_to_line, "PyCode_Addr2Line") &&
              resolve(g_api.utf8, "PyUnicode_AsUTF8AndSize") && find_eval_loop() && g_locations.init(kLocationsLog2, kLocationTables) &&
              g_frames.init(kLocationsLog2, kLocationTables) && map_frame_of();
    g_present = ok;
    return ok;
}

bool present() { return g_present; }

bool initialized() { return g_present && g_api.is_initialized(); }

namespace {

// The frames of the calling thread if it holds the GIL, innermost first; nullptr otherwise.
_PyInterpreterFrame* current_frame() {
    if (!g_present) return nullptr;
    // The thread holding the GIL, if it is this one: then its frames are stable and its code
    // objects may be referenced. The state's thread id answers cheaply; a state made in one
    // thread and used in another (embedders) needs the slower lookup.
    PyThreadState* mine = g_api.gil_holder();
    if (!mine) return nullptr;
    if (mine->thread_id != static_cast<unsigned long>(pthread_self()) && mine != g_api.this_thread_state())
        return nullptr;
    return mine->cframe ? mine->cframe->current_frame : nullptr;
}

// Whether a frame has not started yet (CPython leaves such frames out of tracebacks). Telling
// needs the code object's first traceable instruction, a likely cache miss in another object,
// so only frames near their start look at it.
inline bool not_started(const _PyInterpreterFrame* f, const PyCodeObject* code, int32_t offset) {
    return offset < kPrologueBound && f->owner != FRAME_OWNED_BY_GENERATOR && offset < code->_co_firsttraceable;
}

// Where a frame is; false for a frame that has not started.
inline bool location_of(const _PyInterpreterFrame* f, FrameRef& out) {
    PyCodeObject* code = f->f_code;
    auto offset = static_cast<int32_t>(f->prev_instr - _PyCode_CODE(code));
    if (not_started(f, code, offset)) return false;
    out = {code, offset, f->is_entry};
    return true;
}

}  // namespace

int capture(FrameRef* frames, int max_frames) {
    int count = 0;
    for (_PyInterpreterFrame* f = current_frame(); f && count < max_frames; f = f->previous)
        if (location_of(f, frames[count])) ++count;
    return count;
}

namespace {

// The frames of `memory` from `from` down to the outermost still form the thread's stack
// below it, unchanged: each one's caller is the next one remembered, at the same code and
// instruction. Every frame read is known to be in the live chain by the check before it; the
// loads take their addresses from memory, not from each other, so they do not wait in turn.
bool unchanged_below(const StackMemory& memory, int from) {
    for (int m = from; m > 0; --m) {
        auto* f = static_cast<const _PyInterpreterFrame*>(memory.addresses[m]);
        auto* caller = static_cast<const _PyInterpreterFrame*>(memory.addresses[m - 1]);
        if (f->previous != caller || caller->f_code != memory.frames[m - 1].code ||
            caller->prev_instr != memory.instructions[m - 1])
            return false;
    }
    return static_cast<const _PyInterpreterFrame*>(memory.addresses[0])->previous == memory.below;
}

inline void remember(StackMemory& memory, int i, const FrameRef& frame, const _PyInterpreterFrame* f) {
    memory.frames[i] = frame;
    memory.addresses[i] = f;
    memory.instructions[i] = f->prev_instr;
}

// Makes a whole new capture (innermost first) the remembered stack; `shared` is how many of
// its outermost frames the previous one had too.
int adopt(StackMemory& memory, const FrameRef* frames, const _PyInterpreterFrame* const* addresses, int count,
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

int walk_since(StackMemory& memory, int& shared, bool& confirmed) {
    confirmed = false;
    FrameRef fresh[kMaxPythonFrames];  // walked frames, innermost first
    const _PyInterpreterFrame* fresh_addresses[kMaxPythonFrames];
    int n = 0;
    int j = memory.count - 1;  // the remembered frame that may be the walk's current one
    bool try_shortcut = true;  // one confirmation per capture: a failed one means a full walk
    _PyInterpreterFrame* f = current_frame();
    for (; f && n < kMaxPythonFrames; f = f->previous) {
        if (!location_of(f, fresh[n])) continue;
        // Frames lie in a stack that grows upwards: remembered frames above this one are gone.
        // (Across two chunks of that stack the order may not hold; the walk then simply goes
        // on to the bottom, slower but as exact.)
        auto here = reinterpret_cast<uintptr_t>(f);
        while (j >= 0 && reinterpret_cast<uintptr_t>(memory.addresses[j]) > here) --j;
        if (try_shortcut && j >= 0 && reinterpret_cast<uintptr_t>(memory.addresses[j]) == here &&
            same_location(memory.frames[j], fresh[n])) {
            try_shortcut = false;
            // Under a cut stack, frames beyond the cut would move up into a shallower one.
            bool fits = memory.cut ? j + 1 + n == kMaxPythonFrames : j + 1 + n <= kMaxPythonFrames;
            if (fits && unchanged_below(memory, j)) {
                shared = j + 1;
                for (int i = 0; i < n; ++i) remember(memory, shared + i, fresh[n - 1 - i], fresh_addresses[n - 1 - i]);
                memory.count = shared + n;
                confirmed = true;
                return memory.count;
            }
        }
        fresh_addresses[n++] = f;
    }
    return adopt(memory, fresh, fresh_addresses, n, f, shared);
}

bool g_verify = false;
std::atomic<uint64_t> g_verified{0}, g_confirmed{0}, g_mismatches{0};

void verify(const StackMemory& memory, bool confirmed) {
    FrameRef full[kMaxPythonFrames];
    int count = capture(full, kMaxPythonFrames);
    bool same = count == memory.count;
    for (int k = 0; same && k < count; ++k) same = same_location(full[count - 1 - k], memory.frames[k]);
    g_verified.fetch_add(1, std::memory_order_relaxed);
    if (confirmed) g_confirmed.fetch_add(1, std::memory_order_relaxed);
    if (!same && g_mismatches.fetch_add(1, std::memory_order_relaxed) == 0)
        log_line("stack check: an incremental capture differs from the full walk (%d frames against %d)", memory.count,
                 count);
}

}  // namespace

int capture_since(StackMemory& memory, int& shared) {
    bool confirmed;
    int count = walk_since(memory, shared, confirmed);
    if (g_verify) [[unlikely]]
        verify(memory, confirmed);
    return count;
}

void verify_stacks(bool on) { g_verify = on; }

void report_verification() {
    if (!g_verify) return;
    log_line("stack check: %llu captures, %llu confirmed from memory, %llu differ from a full walk",
             static_cast<unsigned long long>(g_verified.load()), static_cast<unsigned long long>(g_confirmed.load()),
             static_cast<unsigned long long>(g_mismatches.load()));
}

bool is_eval_frame(uint64_t ip) { return ip >= g_api.eval_begin && ip < g_api.eval_end; }

uint32_t intern(const FrameRef& frame, LocationMemo& memo, bool& created) {
    created = false;
    auto offset = static_cast<uint32_t>(frame.offset);
    auto code_key = reinterpret_cast<uint64_t>(frame.code);
    if (uint32_t id = memo.find(g_frames.epoch(), offset, code_key)) return id;
    bool new_location;
    uint32_t location = g_locations.intern(offset, code_key, new_location);
    if (!location) return 0;
    uint32_t id = g_frame_of[location].load(std::memory_order_acquire);
    if (!id) {
        auto* code = reinterpret_cast<PyCodeObject*>(const_cast<void*>(frame.code));
        int line = g_api.addr_to_line(code, frame.offset * static_cast<int>(sizeof(_Py_CODEUNIT)));
        id = g_frames.intern(static_cast<uint32_t>(line > 0 ? line : 0), code_key, created);
        if (!id) return 0;
        // The id stands for this code object from now on, so it must never be freed and its
        // address reused by another one.
        if (created) Py_INCREF(reinterpret_cast<PyObject*>(code));
        g_frame_of[location].store(id, std::memory_order_release);
    }
    memo.remember(offset, code_key, id);
    return id;
}

void encode_frame(uint32_t id, const FrameRef& frame, format::RecordEncoder& out) {
    auto* code = reinterpret_cast<PyCodeObject*>(const_cast<void*>(frame.code));
    Py_ssize_t file_size, name_size;
    const char* file = text_of(code->co_filename, file_size);
    const char* name = text_of(code->co_qualname, name_size);
    int line = g_api.addr_to_line(code, frame.offset * static_cast<int>(sizeof(_Py_CODEUNIT)));
    out.varint(id).string(file, static_cast<size_t>(file_size)).string(name, static_cast<size_t>(name_size));
    out.varint(line > 0 ? static_cast<uint64_t>(line) : 0);
}

void reset() {
    g_locations.reset();
    g_frames.reset();
    if (g_frame_of) map_frame_of();  // fresh zero pages
}

}  // namespace growtrace::preload::python
