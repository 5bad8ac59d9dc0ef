#include "preload/write/writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "format/record_codec.h"
#include "format/records.h"
#include "preload/support/clock.h"
#include "preload/support/descriptors.h"
#include "preload/support/log.h"
#include "preload/capture/module_map.h"
#include "preload/support/recursion_guard.h"
#include "preload/record/sampler.h"
#include "preload/record/writer_doorbell.h"
#include "preload/support/extension_points.h"
#include "preload/support/trace_state.h"
#include "preload/write/event_merger.h"
#include "preload/support/file_thread.h"
#include "preload/record/thread_registry.h"
#include "preload/write/trace_compactor.h"
#include "preload/write/trace_file.h"
#include "preload/support/process_stat.h"
#include "preload/support/tracer_thread.h"

namespace growtrace::preload {
namespace {

// Blocks are cut at about this many raw bytes: big enough to compress well, small enough that
// the reader never needs much memory.
constexpr size_t kBlockTarget = 4u << 20;
// Sampled mode writes a block about every 5 s rather than every tick: a trace of hours is then
// mostly small records that compress far better together; and a time mark (and the caches'
// sizes) once a second, which is plenty for windows of seconds (docs/sampling.md). A killed
// process loses at most those 5 s.
constexpr uint64_t kSampledBlockNs = 5000000000;
constexpr uint64_t kSampledMarkNs = 1000000000;
uint64_t g_last_block_ns = 0;
uint64_t g_last_mark_ns = 0;

pthread_mutex_t g_cycle_mutex = PTHREAD_MUTEX_INITIALIZER;  // one flush at a time
// Threads waiting in writer_prepare_fork for the cycle lock. A busy program wakes the writer
// for cycle after cycle, and a mutex is not fair: the writer, taking the lock again the moment
// it let it go, kept a forking thread waiting half a second a fork. It lets a fork in first.
std::atomic<int> g_forks_waiting{0};
pthread_mutex_t g_global_mutex = PTHREAD_MUTEX_INITIALIZER;
uint8_t* g_global = nullptr;  // the tracer's own records, in order
size_t g_global_used = 0, g_global_capacity = 0;

pthread_mutex_t g_wake_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_wake_cond = PTHREAD_COND_INITIALIZER;
// Set by writer_wake (any thread, no lock): the writer's wait ends before its tick.
std::atomic<bool> g_wake{false};
bool g_stop = false;
// Parking (writer_park_for_fork): the thread is asked to leave (g_park), says when it has
// (g_thread_running false, g_left signalled) and is started again by writer_resume().
std::atomic<bool> g_park{false};
bool g_thread_running = false;
pthread_cond_t g_left = PTHREAD_COND_INITIALIZER;
std::atomic<pid_t> g_thread_tid{0};  // the writer thread's kernel id
constexpr unsigned kParkWaitMs = 500;  // for the writer to leave (it may be mid-cycle)
std::atomic<bool> g_scan_requested{false};
std::atomic<void (*)()> g_tick_task{nullptr};

TraceFile* g_file = nullptr;
unsigned g_tick_ms = 100;
// How often the writer reads /proc/self/stat: for the RSS of its time marks and to see whether
// the program's threads have all ended, once a second; every kWatchMs (whatever the tick) once
// the main thread has ended, the only way all can end without exit(). Each read opens the file
// for a moment, on the file thread (file_thread.h).
constexpr unsigned kWatchMs = 100;
constexpr uint64_t kStatPeriodNs = 1000000000u;
std::atomic<bool> g_main_thread_ended{false};
uint64_t g_stat_read_ns = 0;  // when it was last read (writer thread)
uint64_t g_rss_bytes = 0;     // as it said then

constinit TraceCompactor g_compactor;
std::atomic<uint64_t> g_exit_ticks{0};  // writer_note_exit
uint8_t* g_block = nullptr;  // records being assembled into the next block
size_t g_block_used = 0, g_block_capacity = 0;
bool g_write_failed = false;
// Sampled traces: the block as written, once the compactor has counted its short-lived samples
// (TraceCompactor::fold_short_lived). Counting renumbers the block's allocations, so a block is
// only cut between two of the compactor's calls (g_hold_cut while it works on a buffer: the
// block may then pass kBlockTarget by what one buffer gives).
uint8_t* g_folded = nullptr;
size_t g_folded_capacity = 0;
bool g_hold_cut = false;
// Room beyond the block's own size for the rewritten block: the count record is mostly smaller
// than the records it replaces, and a block that would not fit is written as it was.
constexpr size_t kFoldSlack = 64 * 1024;

bool reserve(uint8_t*& data, size_t& capacity, size_t needed) {
    if (needed <= capacity) return true;
    size_t grown = capacity ? capacity * 2 : 256 * 1024;
    while (grown < needed) grown *= 2;
    auto* bigger = static_cast<uint8_t*>(realloc(data, grown));
    if (!bigger) return false;
    data = bigger;
    capacity = grown;
    return true;
}

// Reads /proc/self/stat if it is due; true when the program's threads have all ended.
bool program_ended() {
    uint64_t now = monotonic_ns();
    if (g_stat_read_ns && now - g_stat_read_ns < kStatPeriodNs && !g_main_thread_ended.load(std::memory_order_relaxed))
        return false;
    g_stat_read_ns = now;
    ProcessStat stat;
    if (!read_own_stat(stat)) return false;
    // A main thread that ended has no memory of its own to count: keep the last figure.
    if (stat.rss_pages) g_rss_bytes = stat.rss_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    return program_has_ended(stat);
}

uint64_t read_rss_bytes() {
    if (!g_stat_read_ns) program_ended();
    return g_rss_bytes;
}

bool before(const timespec& a, const timespec& b) {
    return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

// The tracer cannot go on (disk full, file removed...): the program continues untraced, and
// producers never wait for the writer again.
void stop_tracing(const char* why) {
    set_tracer_state(TracerState::Stopped);
    log_line("%s; tracing stopped, the program continues (the trace so far is readable)", why);
    pool_stop_waiting();
}

void write_block_now() {
    if (g_block_used == 0 || g_write_failed) {
        g_block_used = 0;
        return;
    }
    const uint8_t* records = g_block;
    size_t size = g_block_used;
    if (sampling_enabled() && reserve(g_folded, g_folded_capacity, g_block_used + kFoldSlack)) {
        if (size_t folded = g_compactor.fold_short_lived(g_block, g_block_used, g_folded, g_folded_capacity)) {
            records = g_folded;
            size = folded;
        }
    }
    if (!g_file->write_block(records, size)) {
        g_write_failed = true;
        char why[4200];
        if (g_file->was_removed()) snprintf(why, sizeof why, "trace file %s was removed", g_file->path());
        else snprintf(why, sizeof why, "cannot write trace to %s: %s", g_file->path(), strerror(g_file->last_error()));
        stop_tracing(why);
    }
    g_block_used = 0;
}

void append(const uint8_t* data, size_t size) {
    if (g_block_used + size > kBlockTarget && !g_hold_cut) write_block_now();
    if (reserve(g_block, g_block_capacity, g_block_used + size)) {
        memcpy(g_block + g_block_used, data, size);
        g_block_used += size;
    }
}

// The compactor's sink. Most of its records are a few bytes (one per allocation and free):
// those are copied as a fixed 16 bytes, inline, instead of through a memcpy call. Its records
// come from a buffer much larger than that, and the block keeps 16 bytes spare.
constexpr size_t kSmallCopy = 16;

void append_compacted(const uint8_t* data, size_t size) {
    if (size > kSmallCopy) return append(data, size);
    if (g_block_used + size > kBlockTarget && !g_hold_cut) write_block_now();
    if (!reserve(g_block, g_block_capacity, g_block_used + kSmallCopy)) return;
    memcpy(g_block + g_block_used, data, kSmallCopy);
    g_block_used += size;
}

constinit EventMerger g_merger;

void release_buffer(Buffer* buffer) { pool_put(buffer); }

void take_buffer(Buffer* buffer) {
    g_compactor.note_recorded(buffer->allocations, buffer->frees, 0);
    g_merger.add(buffer);
}

void note_stream(uint32_t stream, uint64_t caught_up_to, bool gone) { g_merger.note(stream, caught_up_to, gone); }

// A thread that stays in the middle of an event (stopped inside a hook by a debugger, say) holds
// every other thread's events back in the merger, and with them the pool's buffers. Rather than
// have the program's threads wait for buffers, when half the pool is still held after a merge
// the events are merged without it, and the trace says so once: frees decided then may miss an
// allocation of that thread.
bool merge_without_a_stalled_thread() {
    static bool said = false;
    if (g_merger.buffers_held() <= kMaxBuffers / 2) return false;
    if (!said) {
        said = true;
        format::RecordEncoder error(format::records::TracerError::kKind);
        uint8_t bytes[256];
        format::encode(error, format::records::TracerError{
                                  now_ticks(), format::Bytes::of("a thread stayed inside the tracer while half its buffers "
                                                                 "filled: events were merged without waiting for it, and "
                                                                 "its frees may be left unmatched")});
        append(bytes, error.finish(bytes));
    }
    return true;
}

// Between the once-a-second collections of a sampled trace, a program that allocates fast (or
// samples every byte) hands over buffer after buffer, and the merger can hand none of their
// events on before a collection says how far every thread has come. Past an eighth of the pool
// the next cycle collects at once, well before merge_without_a_stalled_thread would give up on
// the ordering.
bool merger_is_filling() { return g_merger.buffers_held() > kMaxBuffers / 8; }

// The threads' buffers go to the merger: with `current`, each thread's current buffer too, and
// how far each has caught up (a collection); in any case the queue of full buffers.
void hand_buffers_to_merger(bool current) {
    if (current) g_compactor.note_recorded(0, 0, thread_registry_collect({take_buffer, note_stream}));
    for (Buffer* b = pool_take_full(); b;) {
        Buffer* next = b->next;
        take_buffer(b);
        b = next;
    }
}

// The merger hands the threads' events to the compactor in time order up to what every thread
// has caught up with (event_merger.h). Without the threads' current buffers (`current` false: a
// sampled trace takes them once a second) the full queue still goes in, so a producer never
// waits longer for a free buffer than in a full trace; its events wait in the merger until a
// collection says how far each thread has come. Should half the pool still wait after the
// merge, a collection is made at once, in a full trace too: a thread found in the middle of an
// event at the cycle's collection (left for the next one) holds every other thread's events
// back until then, and on a busy machine the next cycle can be a long way off. Only if that
// collection frees nothing is a thread stalled. Sampled traces keep the block whole while the
// compactor works (g_hold_cut).
void write_thread_runs(bool current, bool final) {
    hand_buffers_to_merger(current);
    g_compactor.mark_exit(g_exit_ticks.load(std::memory_order_relaxed));
    g_compactor.begin(append_compacted);
    g_hold_cut = sampling_enabled();
    g_merger.merge(g_compactor, final, release_buffer);
    if (!final && g_merger.buffers_held() > kMaxBuffers / 2) {
        hand_buffers_to_merger(true);
        g_merger.merge(g_compactor, false, release_buffer);
    }
    if (!final && merge_without_a_stalled_thread()) g_merger.merge(g_compactor, true, release_buffer);
    g_hold_cut = false;
    if (g_block_used > kBlockTarget) write_block_now();
}

void emit_time_mark() {
    format::RecordEncoder mark(format::records::TimeMark::kKind);
    writer_emit(format::encode(mark, format::records::TimeMark{now_ticks(), monotonic_ns(), read_rss_bytes()}));
}

// `write`: the block goes to the file now (not only when it is due). `drain` (an exec, or the
// end): every event is merged, whatever the threads have caught up with, and the ledger written.
void cycle(bool final, bool write, bool drain = false) {
    pthread_mutex_lock(&g_cycle_mutex);
    if (g_file && g_file->is_open()) {
        module_map_scan(writer_emit, g_scan_requested.exchange(false));
        const uint64_t now = monotonic_ns();
        const bool sparse = sampling_enabled() && !write && !final;
        // Sampled: the threads' current buffers, a time mark and the caches' sizes once a
        // second (fewer Thread runs and Time records); full buffers every cycle.
        const bool every_thread = !sparse || now - g_last_mark_ns >= kSampledMarkNs || merger_is_filling();
        if (every_thread) {
            emit_time_mark();
            extension().writer_cycle(writer_emit);
            g_last_mark_ns = now;
        }

        pthread_mutex_lock(&g_global_mutex);
        append(g_global, g_global_used);
        g_global_used = 0;
        pthread_mutex_unlock(&g_global_mutex);

        write_thread_runs(every_thread, final || drain);
        if (every_thread && sampling_enabled()) g_compactor.write_miss_counts(now_ticks(), final, append_compacted);
        if (final || drain) g_compactor.write_ledger();
        if (final) {
            format::RecordEncoder end(format::records::End::kKind);
            format::encode(end, format::records::End{now_ticks(), monotonic_ns()});
            uint8_t bytes[32];
            append(bytes, end.finish(bytes));
        }
        if (!sparse || now - g_last_block_ns >= kSampledBlockNs) {
            write_block_now();
            g_last_block_ns = now;
        }
        if (final || g_write_failed) g_file->close();
    }
    pthread_mutex_unlock(&g_cycle_mutex);
}

// Bounded (10 ms): a forking thread held up by a debugger between its count and the lock must
// not stop the trace.
void let_forks_in() {
    for (int i = 0; i < 200 && g_forks_waiting.load(std::memory_order_acquire) > 0; ++i) {
        timespec pause{0, 50'000};
        nanosleep(&pause, nullptr);
    }
}

// Writes a block every tick (or when woken), and looks every kWatchMs whether the program's
// threads have all ended: then this thread ends the process in their place.
void* writer_main(void*) {
    t_in_tracer = true;  // nothing this thread allocates is the program's
    prctl(PR_SET_NAME, "growtrace-wr", 0, 0, 0);
    g_thread_tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
    pthread_mutex_lock(&g_wake_mutex);
    while (!g_stop && !g_park.load()) {
        timespec deadline = after_ms(g_tick_ms);
        while (!g_wake && !g_stop && !g_park.load()) {
            timespec watch = after_ms(kWatchMs);
            bool tick = !before(watch, deadline);
            if (pthread_cond_timedwait(&g_wake_cond, &g_wake_mutex, tick ? &deadline : &watch) != ETIMEDOUT) continue;
            if (program_ended()) {
                pthread_mutex_unlock(&g_wake_mutex);
                end_process_for_program();
            }
            if (tick) break;
        }
        g_wake = false;
        if (g_stop || g_park.load()) break;
        pthread_mutex_unlock(&g_wake_mutex);
        let_forks_in();
        cycle(false, false);
        if (auto task = g_tick_task.load(std::memory_order_acquire)) task();
        pthread_mutex_lock(&g_wake_mutex);
    }
    pthread_mutex_unlock(&g_wake_mutex);
    file_thread_stop();  // gone before the writer says it has left (a fork may be waiting)
    pthread_mutex_lock(&g_wake_mutex);
    g_thread_running = false;
    pthread_cond_broadcast(&g_left);
    pthread_mutex_unlock(&g_wake_mutex);
    return nullptr;
}

bool spawn_thread() {
    pthread_mutex_lock(&g_wake_mutex);
    g_thread_running = true;
    pthread_mutex_unlock(&g_wake_mutex);
    file_thread_start();
    int rc = start_tracer_thread(writer_main, nullptr);
    if (rc != 0) {
        file_thread_stop();
        log_line("cannot start the writer thread: %s; tracing disabled", strerror(rc));
        pthread_mutex_lock(&g_wake_mutex);
        g_thread_running = false;
        pthread_mutex_unlock(&g_wake_mutex);
    }
    return rc == 0;
}

}  // namespace

bool writer_start(TraceFile* file, unsigned tick_ms) {
    static constexpr WriterDoorbell kDoorbell = {writer_wake, writer_request_module_scan, writer_note_main_thread_ended};
    connect_writer(&kDoorbell);
    g_file = file;
    g_tick_ms = tick_ms;
    return spawn_thread();
}

void writer_emit(const format::RecordEncoder& record) {
    pthread_mutex_lock(&g_global_mutex);
    if (reserve(g_global, g_global_capacity, g_global_used + record.size()))
        g_global_used += record.finish(g_global + g_global_used);
    pthread_mutex_unlock(&g_global_mutex);
}

void writer_note_exit(uint64_t ticks) {
    uint64_t seen = g_exit_ticks.load(std::memory_order_relaxed);
    while ((!seen || ticks < seen) && !g_exit_ticks.compare_exchange_weak(seen, ticks)) {}
}

void writer_run_each_tick(void (*task)()) { g_tick_task.store(task, std::memory_order_release); }

void writer_request_module_scan() {
    g_scan_requested.store(true, std::memory_order_relaxed);
    pthread_cond_signal(&g_wake_cond);
}

void writer_wake() {
    // Parked, the writer is needed back: producers would soon wait for free buffers.
    if (g_park.load(std::memory_order_relaxed)) writer_resume();
    // Without the writer's lock: a wake that falls between its check and its wait waits for
    // the next watch (kWatchMs) instead.
    g_wake.store(true);
    pthread_cond_signal(&g_wake_cond);
}

bool writer_park_for_fork() {
    pthread_mutex_lock(&g_wake_mutex);
    if (g_stop || g_park.load() || !g_thread_running) {
        pthread_mutex_unlock(&g_wake_mutex);
        return false;
    }
    g_park.store(true);
    pthread_cond_signal(&g_wake_cond);
    // The writer may be inside a cycle that waits for a lock this thread holds (the loader's,
    // in a fork from a library constructor): then it stays, and the fork goes on with it.
    timespec limit = after_ms(kParkWaitMs);
    while (g_thread_running)
        if (pthread_cond_timedwait(&g_left, &g_wake_mutex, &limit) == ETIMEDOUT) break;
    bool left = !g_thread_running;
    if (!left) g_park.store(false);
    pthread_mutex_unlock(&g_wake_mutex);
    if (left) wait_until_thread_gone(g_thread_tid.load());
    return left;
}

void writer_resume() {
    RecursionGuard guard;
    pthread_mutex_lock(&g_wake_mutex);
    bool parked = g_park.exchange(false);
    bool start = parked && !g_stop;
    pthread_mutex_unlock(&g_wake_mutex);
    if (start) spawn_thread();
}

void writer_note_main_thread_ended() { g_main_thread_ended.store(true); }

// The program's other threads end with the exec: nothing of theirs is left to wait for. Should
// the exec fail, the trace goes on, and the ledger at its end is the one that counts.
void writer_flush_before_exec() {
    RecursionGuard guard;
    cycle(false, true, true);
}

// The writer thread is told to stop only after the final cycle: once it is gone the trace is
// complete (`growtrace detach` waits for that). A cycle it runs meanwhile finds the file closed.
void writer_flush(bool final) {
    RecursionGuard guard;
    cycle(final, true);
    if (!final) return;
    pthread_mutex_lock(&g_wake_mutex);
    g_stop = true;
    pthread_cond_signal(&g_wake_cond);
    pthread_mutex_unlock(&g_wake_mutex);
    pool_stop_waiting();
}

bool writer_wait_until_ended(int timeout_ms) {
    pthread_mutex_lock(&g_wake_mutex);
    timespec limit = after_ms(timeout_ms);
    while (g_thread_running)
        if (pthread_cond_timedwait(&g_left, &g_wake_mutex, &limit) == ETIMEDOUT) break;
    bool left = !g_thread_running;
    pthread_mutex_unlock(&g_wake_mutex);
    if (left) wait_until_thread_gone(g_thread_tid.load());
    return left;
}

void writer_prepare_fork() {
    g_forks_waiting.fetch_add(1, std::memory_order_acq_rel);
    pthread_mutex_lock(&g_cycle_mutex);
    g_forks_waiting.fetch_sub(1, std::memory_order_acq_rel);
    module_map_prepare_fork();
    pthread_mutex_lock(&g_global_mutex);
}

void writer_parent_after_fork() {
    pthread_mutex_unlock(&g_global_mutex);
    module_map_parent_after_fork();
    pthread_mutex_unlock(&g_cycle_mutex);
}

// Only this thread exists in the child: no writer thread (a new one is started for the child's
// trace), and the wake-up lock and condition may have been held by the parent's.
void writer_child_after_fork() {
    pthread_mutex_unlock(&g_global_mutex);
    module_map_child_after_fork();
    pthread_mutex_unlock(&g_cycle_mutex);
    g_forks_waiting.store(0);  // a thread that was waiting to fork is not in the child
    pthread_mutex_init(&g_wake_mutex, nullptr);
    pthread_cond_init(&g_wake_cond, nullptr);
    pthread_cond_init(&g_left, nullptr);
    g_thread_running = false;  // the parent's writer, if any, is not in the child
    file_thread_forget_after_fork();
    tracer_threads_forget_after_fork();
}

void writer_reset(SessionOrigin origin) {
    pthread_mutex_lock(&g_cycle_mutex);
    pthread_mutex_lock(&g_global_mutex);
    g_global_used = 0;  // the previous trace's records
    pthread_mutex_unlock(&g_global_mutex);
    g_compactor.reset();  // and its live allocations
    g_merger.reset(release_buffer);  // and the events it held
    g_exit_ticks.store(0);
    g_block_used = 0;
    g_write_failed = false;
    pthread_mutex_unlock(&g_cycle_mutex);
    pthread_mutex_lock(&g_wake_mutex);
    g_wake.store(false);
    g_stop = false;
    g_park.store(false);
    pthread_mutex_unlock(&g_wake_mutex);
    // An attached process's main thread that ended during an earlier trace stays ended.
    if (origin == SessionOrigin::Forked) g_main_thread_ended.store(false);
    g_stat_read_ns = 0;
}

void writer_release_memory() {
    auto release = [](uint8_t*& data, size_t& capacity) {
        free(data);
        data = nullptr;
        capacity = 0;
    };
    release(g_global, g_global_capacity);
    release(g_block, g_block_capacity);
    release(g_folded, g_folded_capacity);
    g_global_used = g_block_used = 0;
}

}  // namespace growtrace::preload
