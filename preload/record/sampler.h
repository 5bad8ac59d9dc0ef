// Sampled mode (`growtrace run --sample SIZE`, GROWTRACE_SAMPLE): which allocations
// the hooks record, and which frees.
//
// Allocations are sampled by bytes, as tcmalloc and jemalloc do: the sample points form a
// Poisson process over the bytes each thread allocates, with a mean of `period` bytes between
// points, and an allocation is a sample when a point falls inside it. A block of s bytes is
// therefore a sample with probability p = 1 - exp(-s / period), every byte being equally
// likely to be picked; the analyzer weighs a sample by 1/p (allocations) and s/p (bytes),
// which makes its estimates unbiased (docs/trace-format.md, "Sampling"). Each thread keeps the
// distance to its next point in an initial-exec TLS countdown: an allocation that is not a
// sample costs a subtraction, before any other work of the hook (no stack, no record, no
// recursion guard). The distances are drawn from the exponential distribution with a
// per-thread xorshift generator.
//
// Frees are recorded for samples only, so the addresses of live samples are kept: an exact
// open-addressing table behind a spin lock, fronted by a counting filter (one byte per hash
// bucket, the number of live samples whose address hashes there). A free whose bucket is zero
// cannot be a sample: one load, no lock. A counter that reaches 255 stays there (it may then
// claim a block that is not a sample; the exact table answers), so the filter never misses a
// live sample. Every free loads a counter at a random place, so the filter starts small enough
// to stay in the L1 cache (16 KiB) and grows fourfold, up to 4 MiB, whenever the live samples
// would make more than 1 free in 32 a false hit; a filter replaced that way is kept (a free may
// still be reading it) and only ever claims too much.
//
// In full mode (period 0) nothing here is used: the TLS countdown stays 0, so the first test
// of the hooks fails and they record every allocation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace growtrace::preload {

// Bytes this thread may still allocate before its next sample point; 0 = none drawn yet.
extern __thread uint64_t t_sample_countdown __attribute__((tls_model("initial-exec")));
// Mean bytes between samples; 0 = full tracing (every allocation recorded).
extern std::atomic<uint64_t> g_sample_period;
// The counting filter, null in full mode: the address of its counters (64-byte aligned) with
// the log2 of their number in the low 6 bits, so that one load gives both.
extern std::atomic<uintptr_t> g_sample_filter;

inline constexpr unsigned kSampleFilterMinLog2 = 14;  // 16 KiB of counters
inline constexpr unsigned kSampleFilterMaxLog2 = 22;  // 4 MiB

inline uint64_t sample_period() { return g_sample_period.load(std::memory_order_relaxed); }
inline bool sampling_enabled() { return sample_period() != 0; }

// The hooks' first test: true when an allocation of `size` bytes is not a sample in sampled
// mode (its bytes are counted). Full mode, or a sample point inside: false, and the hook
// goes on to sample_take().
inline bool sample_skip(size_t size) {
    uint64_t left = t_sample_countdown;
    if (__builtin_expect(size < left, 1) && __builtin_expect(sampling_enabled(), 1)) {
        t_sample_countdown = left - size;
        return true;
    }
    return false;
}

// After sample_skip() said false: whether the allocation is to be recorded. Always in full
// mode; in sampled mode when a sample point falls inside it (the countdown is then drawn
// again, from the block's end).
bool sample_take(size_t size);

// A page of memory maps to one 64-byte line of counters (a hash of the page picks the line, the
// block's 16-byte granule within 1 KiB its counter): the frees a program makes go to the pages
// it works on, so the counters they read are a few lines that stay in the L1 cache.
inline size_t sample_filter_index(uint64_t addr, unsigned log2) {
    const uint64_t line = ((addr >> 12) * 0x9E3779B97F4A7C15ull) >> (64 - (log2 - 6));
    return static_cast<size_t>((line << 6) | ((addr >> 4) & 63));
}

// False when the block at `ptr` is certainly not a live sample (sampled mode, its filter
// bucket is empty); true otherwise, and always in full mode.
inline bool sample_maybe_live(const void* ptr) {
    const uintptr_t filter = g_sample_filter.load(std::memory_order_acquire);
    if (!filter) return true;
    const auto* counters = reinterpret_cast<const std::atomic<uint8_t>*>(filter & ~uintptr_t{63});
    return counters[sample_filter_index(reinterpret_cast<uint64_t>(ptr), filter & 63)].load(std::memory_order_relaxed) != 0;
}

// For the tests: the filter bucket of an address now, and the filter's log2 size (0: none).
size_t sample_filter_bucket(uint64_t addr);
unsigned sample_filter_log2();

// The set of live samples (sampled mode). Inserting an address already there does nothing.
// Insert returns false when the table cannot grow (out of memory): the block is then not
// recorded, since its free could not be. Remove returns whether the address was there.
bool live_samples_insert(uint64_t addr);
bool live_samples_remove(uint64_t addr);
bool live_samples_contains(uint64_t addr);
uint64_t live_samples_count();

// Sets the mode before tracing starts (TraceSession::begin, for every origin): 0 = full. Sampled mode maps
// the filter and the table (and empties them); returns false if they cannot be mapped, and
// the mode is then full.
bool sampler_configure(uint64_t period);
// Empties the set of live samples (a new trace starts).
void sampler_forget_live();
// Around fork: no thread may hold the table's lock in the child, whose trace starts with no
// live sample; the child also draws its sample points apart from its parent's.
void sampler_prepare_fork();
void sampler_parent_after_fork();
void sampler_child_after_fork();

// A Python allocator hook (PEP 445) in sampled mode: counts the block's bytes once, decides
// whether it is a sample, and keeps the allocator it wraps from counting them again (pymalloc
// passes blocks over 512 bytes to malloc, whose hook must neither count nor sample them) until
// it goes out of scope. True (converts to) when the allocation is to be recorded; always true
// in full mode, where it does nothing else.
class PythonAllocationSample {
public:
    explicit PythonAllocationSample(size_t size) {
        if (!sampling_enabled()) return;
        uint64_t left = t_sample_countdown;
        if (size < left) {
            rest_ = left - size;
            take_ = false;
        } else {
            take_ = sample_take(size);
            rest_ = t_sample_countdown;
        }
        shielded_ = true;
        t_sample_countdown = ~uint64_t{0};
    }
    ~PythonAllocationSample() {
        if (shielded_) t_sample_countdown = rest_;
    }
    PythonAllocationSample(const PythonAllocationSample&) = delete;
    PythonAllocationSample& operator=(const PythonAllocationSample&) = delete;
    explicit operator bool() const { return take_; }

private:
    bool take_ = true;
    bool shielded_ = false;
    uint64_t rest_ = 0;
};

// For the tests: the distance to the next sample point (>= 1), drawn with and advancing a
// xorshift state (the probability that it falls within s bytes is 1 - exp(-s/period), see
// format/sampling.h); and the natural logarithm the draw uses, for x in (0, 1].
uint64_t sample_draw_distance(uint64_t period, uint64_t& state);
double sample_log_for_tests(double x);

}  // namespace growtrace::preload
