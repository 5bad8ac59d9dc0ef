#include "preload/cpython/python_frames.h"

#include <sys/mman.h>

#include <atomic>

#include "preload/support/log.h"
#include "preload/cpython/code_generation.h"
#include "preload/capture/stack_tree.h"

namespace growtrace::preload::python {
namespace {

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
constexpr int kCodeUnitBytes = 2;  // sizeof(_Py_CODEUNIT) in every supported version

bool map_frame_of() {
    g_frame_of_bytes = sizeof(std::atomic<uint32_t>) << kLocationsLog2;
    void* mem = mmap(g_frame_of, g_frame_of_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (g_frame_of ? MAP_FIXED : 0), -1, 0);
    if (mem == MAP_FAILED) return false;
    madvise(mem, g_frame_of_bytes, MADV_POPULATE_WRITE);  // 2 MiB, touched all over: map it now
    g_frame_of = static_cast<std::atomic<uint32_t>*>(mem);
    return true;
}

// Code objects come and go (code compiled at run time, templates), and a new one may take a
// dead one's address. Ids are therefore keyed by the address and the generation of code
// objects freed at it (code_generation.h), not by holding a reference, which would keep every
// code object the program ever ran alive.
uint64_t key_of(const FrameRef& frame) {
    return reinterpret_cast<uint64_t>(frame.code) | uint64_t{frame.generation} << 48;
}

int line_of(const FrameRef& frame) {
    return interpreter().api.addr_to_line(frame.code, frame.offset * kCodeUnitBytes);
}

}  // namespace

// Called once per first trace (TraceSession::init_capture); again only after release().
bool prepare() {
    static const bool probed = probe();
    if (!probed) return false;
    if (g_frame_of) return true;
    return g_locations.init(kLocationsLog2, kLocationTables) && g_frames.init(kLocationsLog2, kLocationTables) &&
           map_frame_of() && watch_code_objects();
}

int capture(FrameRef* frames, int max_frames) { return present() ? layout().capture(frames, max_frames) : 0; }

namespace {
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
    if (!present()) return memory.count = shared = 0;
    bool confirmed;
    int count = layout().capture_since(memory, shared, confirmed);
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

bool is_eval_frame(uint64_t ip) { return ip >= interpreter().eval_begin && ip < interpreter().eval_end; }

uint32_t intern(const FrameRef& frame, LocationMemo& memo, bool& created) {
    created = false;
    auto offset = static_cast<uint32_t>(frame.offset);
    uint64_t code_key = key_of(frame);
    if (uint32_t id = memo.find(g_frames.epoch(), offset, code_key)) return id;
    bool new_location;
    uint32_t location = g_locations.intern(offset, code_key, new_location);
    if (!location) return 0;
    uint32_t id = g_frame_of[location].load(std::memory_order_acquire);
    if (!id) {
        int line = line_of(frame);
        id = g_frames.intern(static_cast<uint32_t>(line > 0 ? line : 0), code_key, created);
        if (!id) return 0;
        g_frame_of[location].store(id, std::memory_order_release);
    }
    memo.remember(offset, code_key, id);
    return id;
}

format::records::PyFrame frame_record(uint32_t id, const FrameRef& frame) {
    size_t file_size, name_size;
    const char* file = text_of(field<Object*>(frame.code, layout().code_filename), file_size);
    const char* name = text_of(field<Object*>(frame.code, layout().code_function), name_size);
    int line = line_of(frame);
    return {id, format::Bytes(file, file_size), format::Bytes(name, name_size), line > 0 ? static_cast<uint64_t>(line) : 0};
}

void release() {
    unwatch_code_objects();
    g_locations.release();
    g_frames.release();
    if (g_frame_of) munmap(g_frame_of, g_frame_of_bytes);
    g_frame_of = nullptr;
}

void reset() {
    g_locations.reset();
    g_frames.reset();
    if (g_frame_of) map_frame_of();  // fresh zero pages
}

}  // namespace growtrace::preload::python
