#include "preload/record/recorder.h"

#include <cstring>

#include "contracts/environment.h"
#include "contracts/trace_names.h"
#include "format/record_codec.h"
#include "format/record_encoder.h"
#include "format/records.h"
#include "format/varint.h"
#include "preload/support/clock.h"
#include "preload/capture/module_map.h"
#include "preload/cpython/python_frames.h"
#include "preload/support/recursion_guard.h"
#include "preload/record/sampler.h"
#include "preload/capture/stack_tree.h"
#include "preload/record/thread_registry.h"
#include "preload/capture/unwinder.h"
#include "preload/record/writer_doorbell.h"
#include "preload/support/extension_points.h"

namespace growtrace::preload {

constinit StackTree g_stack_tree;

namespace {

using format::RecordKind;
namespace records = format::records;

// Queue this many full buffers (4 MiB of events, an eighth of the pool) before waking the
// writer ahead of its tick, so that a thread never waits for a free buffer while the writer
// sleeps; below it the writer's own tick keeps its cost per event low.
constexpr size_t kWakeWriterAfter = kMaxBuffers / 8;

// Writes a record of the format (format/records.h) at the end of the thread's buffer, whose
// room is already made.
template <class R>
void put(ThreadState* ts, const R& record) {
    ts->buffer->used += format::put_record(ts->buffer->data + ts->buffer->used, record);
}

// Makes room for `needed` bytes in the thread's buffer, starting a new run when the buffer
// changes or another thread's events precede (the shared late state).
bool make_room_slow(ThreadState* ts, size_t needed) {
    uint32_t tid = current_tid();
    if (!ts->buffer || ts->buffer->room() < needed + 32) {
        // A buffer filled by an event under way when a new trace began holds the old trace's
        // records: it is not the new trace's to write.
        if (ts->buffer && ts->epoch != g_thread_epoch.load(std::memory_order_acquire)) pool_put(ts->buffer);
        else if (ts->buffer && pool_queue_full(ts->buffer) >= kWakeWriterAfter) ring_writer_wake();
        ts->buffer = nullptr;
        ts->awaiting_buffer.store(true);
        Buffer* fresh = pool_get();
        ts->awaiting_buffer.store(false);
        if (!fresh) {
            ++ts->lost;
            return false;
        }
        fresh->stream = ts->stream;
        ts->buffer = fresh;
    }
    if (ts->run_tid != tid) ts->last_ticks = now_ticks();
    ts->run_tid = tid;
    ts->last_addr = 0;
    put(ts, records::Thread{tid, ts->last_ticks});
    return true;
}

inline bool make_room(ThreadState* ts, size_t needed) {
    if (ts->buffer && ts->buffer->room() >= needed + 32 && ts->run_tid == current_tid()) [[likely]]
        return true;
    return make_room_slow(ts, needed);
}


// The node (parent, ip), writing its StackNode record the first time. 0: table full, or no
// room in the buffer for the record (the stack is cut there).
uint32_t intern_node(ThreadState* ts, uint32_t parent, uint64_t ip, bool* created_out = nullptr) {
    bool created;
    uint32_t id = ts->python_nodes ? ts->python_nodes->intern(g_stack_tree, parent, ip, created)
                                   : ts->nodes.intern(g_stack_tree, parent, ip, created);
    if (id && created) {
        if (!make_room(ts, format::kMaxRecordBytesOf<records::StackNode>)) return 0;
        put(ts, records::StackNode{id, parent, ip});
    }
    if (created_out) *created_out = created;
    return id;
}

// Interns a stack (innermost first) from the outermost frame in, writing each new node to the
// thread's buffer. Native frames never seen in a loaded module ask the writer for a rescan.
uint32_t intern_stack(ThreadState* ts, const uint64_t* frames, int count) {
    ThreadState::StackCache& prev = ts->stack;
    int k = 0;  // frames shared with the previous stack, counted from the outermost
    while (k < count && k < prev.count && prev.frames[k] == frames[count - 1 - k]) ++k;
    uint32_t parent = k ? prev.ids[k - 1] : 0;
    bool unknown_module = false;
    for (; k < count; ++k) {
        uint64_t ip = frames[count - 1 - k];
        bool created;
        uint32_t id = intern_node(ts, parent, ip, &created);
        if (!id) break;
        if (created && !(ip & format::kPythonFrameTag) && !unknown_module && !module_map_covers(ip))
            unknown_module = true;
        prev.frames[k] = ip;
        prev.ids[k] = id;
        parent = id;
    }
    prev.count = k;
    if (unknown_module) ring_module_rescan();
    return parent;
}

// Tagged id of a Python frame location, writing its PyFrame record the first time.
uint64_t python_frame(ThreadState* ts, const python::FrameRef& frame) {
    bool created;
    uint32_t id = python::intern(frame, ts->locations, created);
    if (created) {
        // Through an encoder, which cuts a name too long for any buffer.
        format::RecordEncoder rec(records::PyFrame::kKind);
        format::encode(rec, python::frame_record(id, frame));
        if (make_room(ts, rec.size())) ts->buffer->used += rec.finish(ts->buffer->data + ts->buffer->used);
    }
    return format::kPythonFrameTag | id;
}

// Tagged ids of Python frames (innermost first), reusing the previous capture's outer part.
void tag_python_frames(ThreadState* ts, const python::FrameRef* py, int count, uint64_t* tagged) {
    int k = 0;
    while (k < count && k < ts->prev_py_count && python::same_location(ts->prev_py[k], py[count - 1 - k])) {
        tagged[count - 1 - k] = ts->prev_py_tagged[k];
        ++k;
    }
    for (; k < count; ++k) {
        const python::FrameRef& frame = py[count - 1 - k];
        tagged[count - 1 - k] = python_frame(ts, frame);
        ts->prev_py[k] = frame;
        ts->prev_py_tagged[k] = tagged[count - 1 - k];
    }
    ts->prev_py_count = count;
}

// Captures and interns the calling thread's Python-only stack against its previous one.
uint32_t intern_python_stack(ThreadState* ts) {
    ThreadState::PythonStackCache& prev = ts->python_stack;
    int ided = prev.stack.count;  // frames of the previous stack with node ids
    int k;                        // frames shared with the previous stack, counted from the outermost
    int count = python::capture_since(prev.stack, k);
    uint32_t parent = k ? prev.ids[k - 1] : 0;
    // Another instruction of the same line is the same frame, and under the same parent the
    // same node: no lookup needed while the path has not left the previous one.
    bool on_previous_path = true;
    for (; k < count; ++k) {
        uint64_t tag = python_frame(ts, prev.stack.frames[k]);
        uint32_t id;
        if (on_previous_path && k < ided && prev.tags[k] == tag) {
            id = prev.ids[k];
        } else {
            on_previous_path = false;
            id = intern_node(ts, parent, tag);
            if (!id) break;
        }
        prev.tags[k] = tag;
        prev.ids[k] = id;
        parent = id;
    }
    prev.stack.count = k;  // a full tree cuts the stack: only frames with ids are remembered
    return parent;
}

// Replaces each native frame of the evaluation loop by the Python frames it was running
// (one C-level call runs Python frames up to and including an entry frame).
int merge_python(const uint64_t* ips, int depth, const python::FrameRef* py, const uint64_t* tagged, int py_count,
                 uint64_t* out) {
    int n = 0, next = 0;
    for (int i = 0; i < depth; ++i) {
        if (!python::is_eval_frame(ips[i] - 1)) {
            out[n++] = ips[i];
            continue;
        }
        while (next < py_count) {
            bool entry = py[next].entry;
            out[n++] = tagged[next++];
            if (entry) break;
        }
    }
    while (next < py_count) out[n++] = tagged[next++];  // native stack was cut short
    return n;
}

// The event's time is read here, once its room is made (make_room may wait for the writer).
void put_alloc(ThreadState* ts, void* ptr, size_t size, uint32_t stack) {
    if (!make_room(ts, format::kMaxRecordBytesOf<records::Alloc>)) return;
    const uint64_t ticks = event_ticks();
    ++ts->buffer->allocations;
    auto addr = reinterpret_cast<uint64_t>(ptr);
    put(ts, records::Alloc{static_cast<int64_t>(ticks - ts->last_ticks), size,
                           static_cast<int64_t>(addr - ts->last_addr), stack});
    ts->last_ticks = ticks;
    ts->last_addr = addr;
}


// The calling thread's merged native and Python stack, captured before taking the thread's
// lock and interned after. Frames inside [skip_begin, skip_end) at the innermost end are
// dropped (the Python agent's own extension).
struct CapturedStack {
    uint64_t ips[kMaxFrames];
    int depth = 0;
    python::FrameRef py[python::kMaxPythonFrames];
    int py_count = 0;

    void capture(uint64_t skip_begin = 0, uint64_t skip_end = 0, WalkStart start = {}) {
        ThreadState* ts = my_state();
        depth = ts ? capture_stack(ips, kMaxFrames, ts->unwinding, ts == &g_late ? nullptr : &ts->walk, start) : 0;
        int skip = 0;
        while (skip < depth && ips[skip] >= skip_begin && ips[skip] < skip_end) ++skip;
        if (skip) {
            memmove(ips, ips + skip, sizeof(uint64_t) * static_cast<size_t>(depth - skip));
            depth -= skip;
        }
        py_count = python::present() ? python::capture(py, python::kMaxPythonFrames) : 0;
        if (py_count) extension().interpreter_frames_seen();
    }

    // Call with the thread's state locked.
    uint32_t intern(ThreadState* ts) {
        if (!py_count) return intern_stack(ts, ips, depth);
        uint64_t tagged[python::kMaxPythonFrames];
        uint64_t merged[kMaxFrames + python::kMaxPythonFrames];
        tag_python_frames(ts, py, py_count, tagged);
        int n = merge_python(ips, depth, py, tagged, py_count, merged);
        return intern_stack(ts, merged, n);
    }
};
}  // namespace

// Sampled mode: a sample's free must be recorded, so its address joins the live samples
// first; a block whose address cannot be kept is not recorded at all.
inline bool keep_sample(void* ptr) {
    return !sampling_enabled() || live_samples_insert(reinterpret_cast<uint64_t>(ptr));
}

void record_alloc(void* ptr, size_t size, WalkStart caller) {
    if (!keep_sample(ptr)) return;
    CapturedStack stack;
    stack.capture(0, 0, caller);
    ThreadState* ts = lock_my_state();
    if (!ts) return;
    if (make_room(ts, 64)) put_alloc(ts, ptr, size, stack.intern(ts));
    unlock(ts);
}

uint32_t record_stack(uint64_t skip_begin, uint64_t skip_end) {
    if (!tracer_active()) return 0;
    RecursionGuard guard;
    CapturedStack stack;
    stack.capture(skip_begin, skip_end);
    ThreadState* ts = lock_my_state();
    if (!ts) return 0;
    uint32_t id = make_room(ts, 64) ? stack.intern(ts) : 0;
    unlock(ts);
    return id;
}

// Sampled mode: a class object is followed for its free whether or not its block is a sample,
// so that the analyzer knows exactly which classes are alive (a TypeCreate names the class by
// address; the writer adds a weightless allocation for a block that is not a sample).
void watch_class_object(const uint8_t* body, size_t size) {
    format::Cursor c(body, body + size);
    records::TypeCreate type;
    if (format::decode_after_dticks(c, type) && type.address > format::kPythonGcHeaderBytes)
        live_samples_insert(type.address - format::kPythonGcHeaderBytes);
}

void record_thread_event(format::RecordKind kind, const uint8_t* body, size_t size) {
    if (!tracer_active()) return;
    RecursionGuard guard;
    if (kind == format::RecordKind::TypeCreate && sampling_enabled()) watch_class_object(body, size);
    ThreadState* ts = lock_my_state();
    if (!ts) return;
    if (make_room(ts, size + 2 * format::kMaxVarintBytes + 8)) {
        const uint64_t ticks = event_ticks();
        uint8_t* out = ts->buffer->data + ts->buffer->used;
        uint8_t dticks[format::kMaxVarintBytes];
        size_t dticks_size = static_cast<size_t>(
            format::put_varint(dticks, format::zigzag_encode(static_cast<int64_t>(ticks - ts->last_ticks))) - dticks);
        *out++ = static_cast<uint8_t>(kind);
        out = format::put_varint(out, dticks_size + size);
        memcpy(out, dticks, dticks_size);
        memcpy(out + dticks_size, body, size);
        ts->buffer->used = static_cast<size_t>(out + dticks_size + size - ts->buffer->data);
        ts->last_ticks = ticks;
    }
    unlock(ts);
}

// The stack is captured with the thread's state locked, as it is compared with the previous
// one there; the writer skips a busy thread rather than wait.
void record_python_alloc(void* ptr, size_t size) {
    if (!keep_sample(ptr)) return;
    ThreadState* ts = lock_my_state();
    if (!ts) return;
    put_alloc(ts, ptr, size, intern_python_stack(ts));  // each record makes its own room
    unlock(ts);
}

namespace {
// Where a free went in the thread's buffer, so that it can be taken back.
struct FreePlace {
    ThreadState* ts = nullptr;
    Buffer* buffer = nullptr;
    uint64_t seq = 0;
    size_t begin = 0, end = 0;
    uint64_t last_ticks = 0, last_addr = 0;
};

// Records a free; `hold` keeps the writer off the thread's buffer until release_free().
bool put_free(void* ptr, FreePlace* hold) {
    if (sampling_enabled() && !(sample_maybe_live(ptr) && live_samples_remove(reinterpret_cast<uint64_t>(ptr))))
        return false;
    ThreadState* ts = lock_my_state();
    if (!ts) return true;
    if (make_room(ts, format::kMaxRecordBytesOf<records::Free>)) {
        const uint64_t ticks = event_ticks();
        ++ts->buffer->frees;
        if (hold) *hold = {ts, ts->buffer, ts->buffer->seq, ts->buffer->used, 0, ts->last_ticks, ts->last_addr};
        auto addr = reinterpret_cast<uint64_t>(ptr);
        put(ts, records::Free{static_cast<int64_t>(ticks - ts->last_ticks), static_cast<int64_t>(addr - ts->last_addr)});
        ts->last_ticks = ticks;
        ts->last_addr = addr;
        if (hold) {
            hold->end = ts->buffer->used;
            ts->holding_free = true;
        }
    }
    unlock(ts);
    return true;
}

void release_free(const FreePlace& place) {
    if (!place.ts) return;
    lock(place.ts);
    place.ts->holding_free = false;
    unlock(place.ts);
}

// The free at `place` never happened: removed from the buffer if it is still its last record
// (always, but in the state threads share after their end, where another may have written).
bool take_back_free(void* ptr, const FreePlace& place) {
    if (sampling_enabled()) live_samples_insert(reinterpret_cast<uint64_t>(ptr));
    if (!place.ts) return true;  // no room was made: nothing was written
    ThreadState* ts = place.ts;
    lock(ts);
    bool last = ts->buffer == place.buffer && ts->buffer->seq == place.seq && ts->buffer->used == place.end;
    if (last) {
        --ts->buffer->frees;
        ts->buffer->used = place.begin;
        ts->last_ticks = place.last_ticks;
        ts->last_addr = place.last_addr;
    }
    ts->holding_free = false;
    unlock(ts);
    return last;
}
}  // namespace

bool record_free(void* ptr) { return put_free(ptr, nullptr); }

FreeBeforeResize::FreeBeforeResize(void* ptr) {
    static_assert(sizeof(FreePlace) <= sizeof place_ && alignof(FreePlace) <= 8, "FreeBeforeResize::place_ holds a FreePlace");
    new (place_) FreePlace();
    recorded_ = ptr && put_free(ptr, reinterpret_cast<FreePlace*>(place_));
    ptr_ = ptr;
}

FreeBeforeResize::~FreeBeforeResize() {
    if (!settled_) release_free(*reinterpret_cast<FreePlace*>(place_));
}

bool FreeBeforeResize::take_back() {
    if (!recorded_ || settled_) return true;
    settled_ = true;
    return take_back_free(ptr_, *reinterpret_cast<FreePlace*>(place_));
}


}  // namespace growtrace::preload
