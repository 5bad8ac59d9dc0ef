#include "preload/recorder.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "contracts/environment.h"
#include "contracts/trace_names.h"
#include "format/record_encoder.h"
#include "format/varint.h"
#include "preload/clock.h"
#include "preload/config.h"
#include "preload/descriptors.h"
#include "preload/log.h"
#include "preload/module_map.h"
#include "preload/python/agent_api.h"
#include "preload/python/python_allocator.h"
#include "preload/python/python_frames.h"
#include "preload/recursion_guard.h"
#include "preload/sampler.h"
#include "preload/stack_tree.h"
#include "preload/trace_file.h"
#include "preload/unwinder.h"
#include "preload/writer.h"

namespace growtrace::preload {

__thread bool t_in_tracer __attribute__((tls_model("initial-exec"))) = false;
std::atomic<int> g_tracer_state{static_cast<int>(TracerState::Starting)};

namespace {

using format::RecordKind;

// 2^22 slots: up to ~3 million distinct stack nodes; 64 MiB of address space, touched lazily.
constexpr unsigned kStackTreeLog2 = 22;
// Queue this many full buffers before waking the writer early (about 1 MiB of events).
constexpr size_t kWakeWriterAfter = 16;

struct ThreadState {
    std::atomic<bool> busy{false};  // held by the owner while writing, by the writer while taking
    bool exited = false;
    // A free was recorded that the thread may take back (FreeBeforeResize): the writer leaves
    // its buffer until it is settled.
    bool holding_free = false;
    Buffer* buffer = nullptr;
    uint64_t last_ticks = 0;
    uint64_t last_addr = 0;
    uint32_t run_tid = 0;  // thread of the current run in `buffer`
    ThreadState* next = nullptr;

    // The previous native (or merged) stack of this thread, outermost frame first, with its
    // node ids. Consecutive allocations share most of their stack; only the part below the
    // common prefix needs lookups.
    struct StackCache {
        int count = 0;
        uint64_t frames[kMaxFrames + python::kMaxPythonFrames] = {};
        uint32_t ids[kMaxFrames + python::kMaxPythonFrames] = {};
    };
    StackCache stack;
    // Recent stack-tree lookups. Python programs go through tens of thousands of distinct
    // stack nodes, so a CPython process's threads get a large memo (128 KiB, allocated with
    // the state); other threads keep to 16 KiB, which native programs with many threads pay.
    StackTreeMemo<1024> nodes;
    StackTreeMemo<8192>* python_nodes = nullptr;
    python::LocationMemo locations;  // recent Python frame locations
    // The same idea for Python frame locations: (code, offset) -> tagged frame id.
    int prev_py_count = 0;
    python::FrameRef prev_py[python::kMaxPythonFrames] = {};
    uint64_t prev_py_tagged[python::kMaxPythonFrames] = {};
    // The previous Python-only stack (PEP 445 allocations, most of a Python program's),
    // outermost first: its frames as capture_since() remembers them, with their frame ids and
    // node ids, so only the frames above the unchanged part are interned.
    struct PythonStackCache {
        python::StackMemory stack;  // its frames; stack.count frames have node ids
        uint64_t tags[python::kMaxPythonFrames] = {};  // tagged frame ids (one per line)
        uint32_t ids[python::kMaxPythonFrames] = {};
    };
    PythonStackCache python_stack;

    void forget_stacks() { stack.count = prev_py_count = python_stack.stack.count = 0; }
};

ThreadState* const kThreadGone = reinterpret_cast<ThreadState*>(uintptr_t{1});

// Constant-initialised: the library constructor may run before this file's dynamic
// initialisers, which would then reset what recorder_start() read.
constinit Config g_config;
int g_pid = 0;  // the traced process; differs from getpid() only in a vfork child
constinit TraceFile g_file;
constinit StackTree g_tree;
pthread_key_t g_thread_key;

pthread_mutex_t g_registry_mutex = PTHREAD_MUTEX_INITIALIZER;
ThreadState* g_threads = nullptr;
// Events of threads whose thread-exit destructor already ran (other destructors may still
// allocate); shared, so its runs name their thread each time.
constinit ThreadState g_late;

__thread ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;
__thread uint32_t t_tid __attribute__((tls_model("initial-exec"))) = 0;

uint32_t current_tid() {
    if (!t_tid) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
    return t_tid;
}

void lock(ThreadState* ts) {
    while (ts->busy.exchange(true, std::memory_order_acquire)) __builtin_ia32_pause();
}
void unlock(ThreadState* ts) { ts->busy.store(false, std::memory_order_release); }

void on_thread_exit(void* arg) {
    auto* ts = static_cast<ThreadState*>(arg);
    RecursionGuard guard;
    if (current_tid() == static_cast<uint32_t>(g_pid)) writer_note_main_thread_ended();
    lock(ts);
    Buffer* b = ts->buffer;
    ts->buffer = nullptr;
    ts->exited = true;
    unlock(ts);
    if (b && b->used) pool_queue_full(b);
    else if (b) pool_put(b);
    t_state = kThreadGone;
}

void free_thread_state(ThreadState* ts) {
    free(ts->python_nodes);
    free(ts);
}

ThreadState* new_thread_state() {
    auto* ts = static_cast<ThreadState*>(calloc(1, sizeof(ThreadState)));  // untraced: guard held
    if (!ts) return nullptr;
    new (ts) ThreadState();
    if (python::present()) {
        void* memo = calloc(1, sizeof(StackTreeMemo<8192>));
        if (memo) ts->python_nodes = new (memo) StackTreeMemo<8192>();
    }
    ts->last_ticks = now_ticks();
    pthread_mutex_lock(&g_registry_mutex);
    ts->next = g_threads;
    g_threads = ts;
    pthread_mutex_unlock(&g_registry_mutex);
    pthread_setspecific(g_thread_key, ts);
    return ts;
}

// The calling thread's state, locked. nullptr if none can be had.
ThreadState* lock_my_state() {
    ThreadState* ts = t_state;
    if (ts == nullptr) ts = t_state = new_thread_state();
    if (ts == kThreadGone) ts = &g_late;
    if (!ts) return nullptr;
    lock(ts);
    return ts;
}

// Makes room for `needed` bytes in the thread's buffer, starting a new run when the buffer
// changes or another thread's events precede (the shared late state).
bool make_room_slow(ThreadState* ts, size_t needed) {
    uint32_t tid = current_tid();
    if (!ts->buffer || ts->buffer->room() < needed + 32) {
        if (ts->buffer && pool_queue_full(ts->buffer) >= kWakeWriterAfter) writer_wake();
        ts->buffer = pool_get();
        if (!ts->buffer) return false;
    }
    if (ts->run_tid != tid) ts->last_ticks = now_ticks();
    ts->run_tid = tid;
    ts->last_addr = 0;
    uint8_t payload[2 * format::kMaxVarintBytes];
    uint8_t* q = format::put_varint(payload, tid);
    q = format::put_varint(q, ts->last_ticks);
    uint8_t* out = ts->buffer->data + ts->buffer->used;
    *out++ = static_cast<uint8_t>(RecordKind::Thread);
    out = format::put_varint(out, static_cast<uint64_t>(q - payload));
    memcpy(out, payload, static_cast<size_t>(q - payload));
    ts->buffer->used = static_cast<size_t>(out + (q - payload) - ts->buffer->data);
    return true;
}

inline bool make_room(ThreadState* ts, size_t needed) {
    if (ts->buffer && ts->buffer->room() >= needed + 32 && ts->run_tid == current_tid()) [[likely]]
        return true;
    return make_room_slow(ts, needed);
}

// A record of at most four varints, encoded straight into the thread's buffer (room already
// made): its payload is under 128 bytes, so its length takes one byte, written at the end.
class SmallRecord {
public:
    static constexpr size_t kMaxBytes = 2 + 4 * format::kMaxVarintBytes;
    static_assert(kMaxBytes - 2 < 128, "the length must fit one varint byte");

    SmallRecord(ThreadState* ts, RecordKind kind)
        : ts_(ts), start_(ts->buffer->data + ts->buffer->used), end_(start_ + 2) {
        start_[0] = static_cast<uint8_t>(kind);
    }
    SmallRecord& varint(uint64_t value) {
        end_ = format::put_varint(end_, value);
        return *this;
    }
    void commit() {
        start_[1] = static_cast<uint8_t>(end_ - start_ - 2);
        ts_->buffer->used = static_cast<size_t>(end_ - ts_->buffer->data);
    }

private:
    ThreadState* ts_;
    uint8_t* start_;
    uint8_t* end_;
};

// The node (parent, ip), writing its StackNode record the first time. 0: table full, or no
// room in the buffer for the record (the stack is cut there).
uint32_t intern_node(ThreadState* ts, uint32_t parent, uint64_t ip, bool* created_out = nullptr) {
    bool created;
    uint32_t id = ts->python_nodes ? ts->python_nodes->intern(g_tree, parent, ip, created)
                                   : ts->nodes.intern(g_tree, parent, ip, created);
    if (id && created) {
        if (!make_room(ts, SmallRecord::kMaxBytes)) return 0;
        SmallRecord(ts, RecordKind::StackNode).varint(id).varint(parent).varint(ip).commit();
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
    if (unknown_module) writer_request_module_scan();
    return parent;
}

// Tagged id of a Python frame location, writing its PyFrame record the first time.
uint64_t python_frame(ThreadState* ts, const python::FrameRef& frame) {
    bool created;
    uint32_t id = python::intern(frame, ts->locations, created);
    if (created) {
        format::RecordEncoder rec(RecordKind::PyFrame);
        python::encode_frame(id, frame, rec);
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

void put_alloc(ThreadState* ts, uint64_t ticks, void* ptr, size_t size, uint32_t stack) {
    if (!make_room(ts, SmallRecord::kMaxBytes)) return;
    auto addr = reinterpret_cast<uint64_t>(ptr);
    SmallRecord(ts, RecordKind::Alloc)
        .varint(format::zigzag_encode(static_cast<int64_t>(ticks - ts->last_ticks)))
        .varint(size)
        .varint(format::zigzag_encode(static_cast<int64_t>(addr - ts->last_addr)))
        .varint(stack)
        .commit();
    ts->last_ticks = ticks;
    ts->last_addr = addr;
}

void emit_process_record(const char* parent_trace) {
    const char* exe = module_map_program_path();
    char cmdline[3072];
    size_t cmdline_size = 0;
    int fd = open_for_tracer("/proc/self/cmdline", O_RDONLY);
    if (fd >= 0) {
        ssize_t r = read(fd, cmdline, sizeof cmdline);
        cmdline_size = r > 0 ? static_cast<size_t>(r) : 0;
        close(fd);
    }
    if (cmdline_size && cmdline[cmdline_size - 1] == '\0') --cmdline_size;
    format::RecordEncoder rec(RecordKind::Process);
    rec.varint(static_cast<uint64_t>(getpid())).varint(static_cast<uint64_t>(getppid()));
    rec.varint(now_ticks()).varint(monotonic_ns()).varint(realtime_ns());
    rec.string(exe).string(cmdline, cmdline_size).string(parent_trace);
    writer_emit(rec);
    format::RecordEncoder sampling(RecordKind::Sampling);
    writer_emit(sampling.varint(sample_period()));
}

void prepare_fork() {
    RecursionGuard guard;
    writer_prepare_fork();
    pthread_mutex_lock(&g_registry_mutex);
    pool_prepare_fork();
    sampler_prepare_fork();
}

void parent_after_fork() {
    sampler_parent_after_fork();
    pool_parent_after_fork();
    pthread_mutex_unlock(&g_registry_mutex);
    writer_parent_after_fork();
}

// Only the forking thread exists in the child: the other threads' states hold the parent's
// events (and maybe a lock taken mid-event) and are dropped; this thread starts afresh.
void child_after_fork() {
    RecursionGuard guard;
    sampler_child_after_fork();
    pool_child_after_fork();
    ThreadState* mine = (t_state && t_state != kThreadGone) ? t_state : nullptr;
    for (ThreadState* ts = g_threads; ts;) {
        ThreadState* next = ts->next;
        if (ts->buffer) pool_put(ts->buffer);
        ts->buffer = nullptr;
        if (ts != mine) free_thread_state(ts);
        ts = next;
    }
    g_threads = mine;
    if (mine) {
        mine->next = nullptr;
        mine->busy.store(false);
        mine->holding_free = false;
        mine->run_tid = 0;
        mine->forget_stacks();  // its node ids belong to the parent's trace
    }
    g_late.buffer = nullptr;
    g_late.busy.store(false);
    g_late.holding_free = false;
    g_late.run_tid = 0;
    t_tid = 0;
    g_pid = getpid();
    pthread_mutex_unlock(&g_registry_mutex);
    g_tree.reset();
    python::reset();
    python::forget_caches();

    char parent_trace[sizeof g_config.output];
    snprintf(parent_trace, sizeof parent_trace, "%s", g_file.path());
    g_file.abandon();
    bool keep = tracer_active() && g_config.follow_fork && g_file.open(g_config.output, TraceFile::Origin::Forked);
    if (!keep) g_tracer_state.store(static_cast<int>(TracerState::Stopped));
    writer_child_after_fork(&g_file, keep, g_config.tick_ms);
    if (keep) emit_process_record(parent_trace);
}

void configure_sampling(uint64_t sample_bytes) {
    if (!sampler_configure(sample_bytes))
        log_line("no memory for the table of sampled blocks; tracing every allocation instead");
}

// What capturing stacks needs, once per process: the Python interpreter's symbols (if any),
// libunwind, the stack tree (laid out by parent; in huge pages for CPython's many nodes) and
// the key whose destructor retires a thread's state.
bool init_capture() {
    python::prepare();
    return unwinder_init() && g_tree.init(kStackTreeLog2, {StackTree::Layout::ByParent, python::present()}) &&
           pthread_key_create(&g_thread_key, on_thread_exit) == 0;
}

}  // namespace

void recorder_start() {
    RecursionGuard guard;
    g_config = read_config();
    python::allow_allocator_hooks(g_config.python_objects);
    python::verify_stacks(g_config.verify_stacks);
    configure_sampling(g_config.sample_bytes);
    g_pid = getpid();
    // With exec-following off, an exec'd image finds the first image's trace already there.
    if (!g_config.follow_exec && access(g_config.output, F_OK) == 0) {
        g_tracer_state.store(static_cast<int>(TracerState::Stopped));
        return;
    }
    bool ok = init_capture() && g_file.open(g_config.output, TraceFile::Origin::Started);
    if (!ok) {
        g_tracer_state.store(static_cast<int>(TracerState::Stopped));
        return;
    }
    const char* parent = getenv(environment::kParentTrace);
    emit_process_record(parent ? parent : "");
    if (!writer_start(&g_file, g_config.tick_ms)) {
        g_file.close();
        g_tracer_state.store(static_cast<int>(TracerState::Stopped));
        return;
    }
    pthread_atfork(prepare_fork, parent_after_fork, child_after_fork);
    g_tracer_state.store(static_cast<int>(TracerState::Active));
}

void recorder_stop() {
    int expected = static_cast<int>(TracerState::Active);
    if (!g_tracer_state.compare_exchange_strong(expected, static_cast<int>(TracerState::Stopped))) return;
    python::report_verification();
    writer_flush(true);
}

void recorder_fail(const char* why) {
    g_tracer_state.store(static_cast<int>(TracerState::Stopped));
    log_line("%s; tracing stopped, the program continues (the trace so far is readable)", why);
    pool_stop_waiting();
}

namespace {
// The calling thread's merged native and Python stack, captured before taking the thread's
// lock and interned after. Frames inside [skip_begin, skip_end) at the innermost end are
// dropped (the Python agent's own extension).
struct CapturedStack {
    uint64_t ips[kMaxFrames];
    int depth = 0;
    python::FrameRef py[python::kMaxPythonFrames];
    int py_count = 0;

    void capture(uint64_t skip_begin = 0, uint64_t skip_end = 0) {
        depth = capture_stack(ips, kMaxFrames);
        int skip = 0;
        while (skip < depth && ips[skip] >= skip_begin && ips[skip] < skip_end) ++skip;
        if (skip) {
            memmove(ips, ips + skip, sizeof(uint64_t) * static_cast<size_t>(depth - skip));
            depth -= skip;
        }
        py_count = python::capture(py, python::kMaxPythonFrames);
        if (py_count) python::install_allocator_hooks();
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

void record_alloc(void* ptr, size_t size) {
    if (!keep_sample(ptr)) return;
    CapturedStack stack;
    stack.capture();
    uint64_t ticks = now_ticks();
    ThreadState* ts = lock_my_state();
    if (!ts) return;
    if (make_room(ts, 64)) put_alloc(ts, ticks, ptr, size, stack.intern(ts));
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
    uint64_t source, address;
    if (c.varint(source) && c.varint(address) && address > format::kPythonGcHeaderBytes)
        live_samples_insert(address - format::kPythonGcHeaderBytes);
}

void record_thread_event(format::RecordKind kind, const uint8_t* body, size_t size) {
    if (!tracer_active()) return;
    RecursionGuard guard;
    if (kind == format::RecordKind::TypeCreate && sampling_enabled()) watch_class_object(body, size);
    uint64_t ticks = now_ticks();
    ThreadState* ts = lock_my_state();
    if (!ts) return;
    if (make_room(ts, size + 2 * format::kMaxVarintBytes + 8)) {
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
    uint64_t ticks = now_ticks();
    ThreadState* ts = lock_my_state();
    if (!ts) return;
    put_alloc(ts, ticks, ptr, size, intern_python_stack(ts));  // each record makes its own room
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
    uint64_t ticks = now_ticks();
    ThreadState* ts = lock_my_state();
    if (!ts) return true;
    if (make_room(ts, SmallRecord::kMaxBytes)) {
        if (hold) *hold = {ts, ts->buffer, ts->buffer->seq, ts->buffer->used, 0, ts->last_ticks, ts->last_addr};
        auto addr = reinterpret_cast<uint64_t>(ptr);
        SmallRecord(ts, RecordKind::Free)
            .varint(format::zigzag_encode(static_cast<int64_t>(ticks - ts->last_ticks)))
            .varint(format::zigzag_encode(static_cast<int64_t>(addr - ts->last_addr)))
            .commit();
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

void recorder_after_fork_in_parent(int child_pid) {
    if (!tracer_active() || !g_config.follow_fork) return;
    RecursionGuard guard;
    char path[sizeof g_config.output];
    if (!trace_names::forked_child(g_config.output, child_pid, 1, path, sizeof path)) path[0] = '\0';
    format::RecordEncoder rec(RecordKind::Fork);
    writer_emit(rec.varint(static_cast<uint64_t>(child_pid)).string(path));
}

void recorder_program_exiting() {
    if (!tracer_active()) return;
    RecursionGuard guard;
    uint64_t ticks = now_ticks();
    writer_note_exit(ticks);
    format::RecordEncoder rec(RecordKind::Exiting);
    writer_emit(rec.varint(ticks));
}

bool recorder_before_exec() {
    // A vfork child shares our memory but not our file descriptors (the program may even have
    // closed them): it must not touch the tracer's state. Its exec'd image traces itself.
    if (!tracer_active()) return false;
    if (getpid() != g_pid) return g_config.follow_exec;
    RecursionGuard guard;
    format::RecordEncoder rec(RecordKind::Exec);
    writer_emit(rec.string(""));  // the new image picks its own name (<stem>.exec<N>.gtrace)
    // The image is about to be replaced: everything recorded so far must be on disk. If exec
    // fails, tracing simply goes on.
    writer_flush(false);
    return g_config.follow_exec;
}

void recorder_before_dlclose() {
    if (!tracer_active()) return;
    RecursionGuard guard;
    // Write down the library's address range while it is still mapped: its frames may stay in
    // live stacks after it is gone.
    module_map_scan(writer_emit, true);
}

void recorder_collect_thread_buffers(void (*take)(Buffer*)) {
    pthread_mutex_lock(&g_registry_mutex);
    ThreadState** link = &g_threads;
    while (ThreadState* ts = *link) {
        // A thread writing right now (or blocked for a free buffer) is skipped, not waited for;
        // so is one that may take back the free it just wrote.
        if (ts->busy.exchange(true, std::memory_order_acquire)) {
            link = &ts->next;
            continue;
        }
        if (ts->holding_free) {
            unlock(ts);
            link = &ts->next;
            continue;
        }
        Buffer* b = ts->buffer;
        if (b && b->used) ts->buffer = nullptr;
        else b = nullptr;
        bool gone = ts->exited;
        unlock(ts);
        if (b) take(b);
        if (gone) {
            *link = ts->next;
            free_thread_state(ts);
        } else {
            link = &ts->next;
        }
    }
    pthread_mutex_unlock(&g_registry_mutex);
    if (!g_late.busy.exchange(true, std::memory_order_acquire)) {
        Buffer* b = g_late.holding_free ? nullptr : g_late.buffer;
        if (b && b->used) g_late.buffer = nullptr;
        else b = nullptr;
        g_late.run_tid = 0;
        unlock(&g_late);
        if (b) take(b);
    }
}

// --- attach mode (driven by preload/attach.cpp) ---
//
// A library dlopen'ed into a running process starts one trace per attach. The first attach
// initialises what recorder_start() would; later ones reset what belongs to the previous trace
// (stack and Python frame ids, module list, events a thread was still writing at the stop).
bool recorder_start_attached(const char* output, uint64_t sample_bytes) {
    RecursionGuard guard;
    if (tracer_active()) return false;
    static bool initialised = false;
    g_config = read_config();
    g_config.sample_bytes = sample_bytes;  // the process's environment knows nothing of it
    configure_sampling(g_config.sample_bytes);
    python::allow_allocator_hooks(g_config.python_objects);
    snprintf(g_config.output, sizeof g_config.output, "%s", output);
    g_config.follow_fork = false;  // a forked child keeps our patched GOT but traces nothing
    g_pid = getpid();
    if (!initialised) {
        if (!init_capture()) return false;
        pthread_atfork(prepare_fork, parent_after_fork, child_after_fork);
        initialised = true;
    } else {
        g_tree.reset();
        python::reset();
        pthread_mutex_lock(&g_registry_mutex);
        for (ThreadState* ts = g_threads; ts; ts = ts->next) {
            lock(ts);
            if (ts->buffer) pool_put(ts->buffer);
            ts->buffer = nullptr;
            ts->run_tid = 0;
            ts->forget_stacks();
            unlock(ts);
        }
        pthread_mutex_unlock(&g_registry_mutex);
        lock(&g_late);
        if (g_late.buffer) pool_put(g_late.buffer);
        g_late.buffer = nullptr;
        g_late.run_tid = 0;
        g_late.forget_stacks();
        unlock(&g_late);
        pool_put_list(pool_take_full());
        module_map_forget();
    }
    writer_reset_for_attach();
    if (!g_file.open(g_config.output, TraceFile::Origin::Started)) return false;
    emit_process_record("");
    if (!writer_start(&g_file, g_config.tick_ms)) {
        g_file.close();
        return false;
    }
    g_tracer_state.store(static_cast<int>(TracerState::Active));
    return true;
}

}  // namespace growtrace::preload
