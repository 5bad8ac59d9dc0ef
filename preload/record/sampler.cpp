#include "preload/record/sampler.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "preload/support/clock.h"

namespace growtrace::preload {

__thread uint64_t t_sample_countdown __attribute__((tls_model("initial-exec"))) = 0;
std::atomic<uint64_t> g_sample_period{0};
std::atomic<uintptr_t> g_sample_filter{0};

namespace {

// The thread's generator state; 0 = not seeded yet.
__thread uint64_t t_sample_rng __attribute__((tls_model("initial-exec"))) = 0;

constexpr uint8_t kSticky = 255;
// The filter grows when live samples exceed its size / kFilterLoad (false hits about 1 in 32).
constexpr size_t kFilterLoad = 32;
constexpr size_t kMinTableCapacity = 4096;
// Distances are capped so that the countdown arithmetic can never wrap.
constexpr uint64_t kMaxDistance = uint64_t{1} << 62;

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t thread_rng_state() {
    if (!t_sample_rng) {
        uint64_t local;
        uint64_t seed = mix(now_ticks() ^ (reinterpret_cast<uint64_t>(&local) << 7) ^
                            (static_cast<uint64_t>(getpid()) << 40));
        t_sample_rng = seed ? seed : 1;
    }
    return t_sample_rng;
}

// --- the set of live samples ---

struct SpinLock {
    std::atomic<bool> held{false};
    void lock() {
        while (held.exchange(true, std::memory_order_acquire))
            while (held.load(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
    void unlock() { held.store(false, std::memory_order_release); }
};

SpinLock g_lock;
std::atomic<uint8_t>* g_filter_memory = nullptr;  // the current filter; replaced ones are kept
unsigned g_filter_log2 = 0;
uint64_t* g_slots = nullptr;                      // 0 = empty
size_t g_mask = 0;
size_t g_size = 0;

inline size_t slot_of(uint64_t addr) { return static_cast<size_t>(mix(addr)) & g_mask; }

template <typename T>
T* map_zeroed(size_t count) {
    void* mem = mmap(nullptr, count * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return mem == MAP_FAILED ? nullptr : static_cast<T*>(mem);
}

void place(uint64_t* slots, size_t mask, uint64_t addr) {
    size_t i = static_cast<size_t>(mix(addr)) & mask;
    while (slots[i]) i = (i + 1) & mask;
    slots[i] = addr;
}

bool grow_locked() {
    size_t old_capacity = g_slots ? g_mask + 1 : 0;
    size_t capacity = old_capacity ? old_capacity * 2 : kMinTableCapacity;
    uint64_t* slots = map_zeroed<uint64_t>(capacity);
    if (!slots) return false;
    for (size_t i = 0; i < old_capacity; ++i)
        if (g_slots[i]) place(slots, capacity - 1, g_slots[i]);
    if (g_slots) munmap(g_slots, old_capacity * sizeof(uint64_t));
    g_slots = slots;
    g_mask = capacity - 1;
    return true;
}

// The slot holding addr, or ~0.
size_t find_locked(uint64_t addr) {
    if (!g_slots) return ~size_t{0};
    for (size_t i = slot_of(addr); g_slots[i]; i = (i + 1) & g_mask)
        if (g_slots[i] == addr) return i;
    return ~size_t{0};
}

void erase_locked(size_t i) {
    // Backward-shift deletion keeps every remaining entry reachable from its home slot.
    size_t j = i;
    for (;;) {
        j = (j + 1) & g_mask;
        if (!g_slots[j]) break;
        size_t home = slot_of(g_slots[j]);
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        g_slots[i] = g_slots[j];
        i = j;
    }
    g_slots[i] = 0;
    --g_size;
}

void count_in(std::atomic<uint8_t>* filter, unsigned log2, uint64_t addr) {
    std::atomic<uint8_t>& c = filter[sample_filter_index(addr, log2)];
    uint8_t v = c.load(std::memory_order_relaxed);
    if (v != kSticky) c.store(static_cast<uint8_t>(v + 1), std::memory_order_relaxed);
}

void filter_add(uint64_t addr) { count_in(g_filter_memory, g_filter_log2, addr); }

void filter_remove(uint64_t addr) {
    std::atomic<uint8_t>& c = g_filter_memory[sample_filter_index(addr, g_filter_log2)];
    uint8_t v = c.load(std::memory_order_relaxed);
    if (v != kSticky && v != 0) c.store(static_cast<uint8_t>(v - 1), std::memory_order_relaxed);
}

void publish_filter(bool sampling) {
    g_sample_filter.store(sampling && g_filter_memory ? reinterpret_cast<uintptr_t>(g_filter_memory) | g_filter_log2 : 0,
                          std::memory_order_release);
}

// A filter four times larger, counting every live sample, replaces the current one, which
// stays mapped: a free may have loaded it just before. It never loses a count (nothing is
// removed from it any more), so a free reading it can only be sent to the table needlessly.
void grow_filter_locked() {
    if (g_filter_log2 >= kSampleFilterMaxLog2 || g_size < (size_t{1} << g_filter_log2) / kFilterLoad) return;
    const unsigned log2 = g_filter_log2 + 2 > kSampleFilterMaxLog2 ? kSampleFilterMaxLog2 : g_filter_log2 + 2;
    auto* bigger = map_zeroed<std::atomic<uint8_t>>(size_t{1} << log2);
    if (!bigger) return;  // the current one stays: slower for frees, still exact
    for (size_t i = 0; g_slots && i <= g_mask; ++i)
        if (g_slots[i]) count_in(bigger, log2, g_slots[i]);
    g_filter_memory = bigger;
    g_filter_log2 = log2;
    publish_filter(true);
}

void clear_locked() {
    if (g_filter_memory) memset(static_cast<void*>(g_filter_memory), 0, size_t{1} << g_filter_log2);
    if (g_slots) {
        munmap(g_slots, (g_mask + 1) * sizeof(uint64_t));
        g_slots = nullptr;
        g_mask = 0;
    }
    g_size = 0;
}

// ln(x) for x in (0, 1], without libm (the library links nothing it does not need): x = m 2^e
// with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s), s = (m - 1)/(m + 1), |s| < 0.172, whose
// series converges to double precision in 9 terms.
double log_unit(double x) {
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
    bits = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1023} << 52);  // m in [1, 2)
    double m;
    memcpy(&m, &bits, sizeof m);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        ++e;
    }
    const double s = (m - 1) / (m + 1), s2 = s * s;
    double sum = 0;
    for (int k = 17; k >= 1; k -= 2) sum = sum * s2 + 1.0 / k;
    return 2 * s * sum + e * 0.6931471805599453;
}

}  // namespace

double sample_log_for_tests(double x) { return log_unit(x); }

uint64_t sample_draw_distance(uint64_t period, uint64_t& state) {
    // xorshift64*: plenty for spacing sample points, a handful of instructions.
    uint64_t x = state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    state = x;
    uint64_t r = x * 0x2545F4914F6CDD1Dull;
    double u = static_cast<double>((r >> 11) + 1) * 0x1.0p-53;  // uniform in (0, 1]
    // The point is at X ~ Exp(period) bytes; counting whole bytes, a block of s bytes holds it
    // when ceil(X) <= s, which has probability exactly 1 - exp(-s / period).
    double point = -log_unit(u) * static_cast<double>(period);
    if (!(point < static_cast<double>(kMaxDistance))) return kMaxDistance;
    uint64_t distance = static_cast<uint64_t>(point);  // ceil(point), without libm
    if (static_cast<double>(distance) < point) ++distance;
    return distance ? distance : 1;
}

bool sample_take(size_t size) {
    uint64_t period = sample_period();
    if (!period) return true;
    uint64_t state = thread_rng_state();
    uint64_t left = t_sample_countdown;
    if (left == 0) {
        // The thread's first allocation: its sample points start here.
        left = sample_draw_distance(period, state);
        if (size < left) {
            t_sample_countdown = left - size;
            t_sample_rng = state;
            return false;
        }
    }
    // A point falls inside the block; by the process's lack of memory, the next one is an
    // exponential distance past the block's end.
    t_sample_countdown = sample_draw_distance(period, state);
    t_sample_rng = state;
    return true;
}

bool live_samples_insert(uint64_t addr) {
    if (!addr || !g_filter_memory) return false;
    g_lock.lock();
    bool ok = true;
    if (find_locked(addr) == ~size_t{0}) {
        if (!g_slots || (g_size + 1) * 2 > g_mask + 1) ok = grow_locked() || (g_slots && g_size + 1 < g_mask);
        if (ok) {
            place(g_slots, g_mask, addr);
            ++g_size;
            filter_add(addr);
            grow_filter_locked();
        }
    }
    g_lock.unlock();
    return ok;
}

bool live_samples_remove(uint64_t addr) {
    if (!g_filter_memory) return false;
    g_lock.lock();
    size_t i = find_locked(addr);
    bool found = i != ~size_t{0};
    if (found) {
        erase_locked(i);
        filter_remove(addr);
    }
    g_lock.unlock();
    return found;
}

bool live_samples_contains(uint64_t addr) {
    if (!g_filter_memory) return false;
    g_lock.lock();
    bool found = find_locked(addr) != ~size_t{0};
    g_lock.unlock();
    return found;
}

size_t sample_filter_bucket(uint64_t addr) {
    g_lock.lock();
    size_t b = g_filter_memory ? sample_filter_index(addr, g_filter_log2) : 0;
    g_lock.unlock();
    return b;
}

unsigned sample_filter_log2() {
    g_lock.lock();
    unsigned log2 = g_filter_memory ? g_filter_log2 : 0;
    g_lock.unlock();
    return log2;
}

uint64_t live_samples_count() {
    g_lock.lock();
    uint64_t n = g_size;
    g_lock.unlock();
    return n;
}

bool sampler_configure(uint64_t period) {
    g_lock.lock();
    clear_locked();
    if (period && !g_filter_memory) {
        g_filter_memory = map_zeroed<std::atomic<uint8_t>>(size_t{1} << kSampleFilterMinLog2);
        g_filter_log2 = kSampleFilterMinLog2;
    }
    bool ok = period == 0 || g_filter_memory;
    if (!ok) period = 0;
    publish_filter(period != 0);
    g_sample_period.store(period, std::memory_order_relaxed);
    g_lock.unlock();
    return ok;
}

void sampler_forget_live() {
    g_lock.lock();
    clear_locked();
    g_lock.unlock();
}

void sampler_prepare_fork() { g_lock.lock(); }
void sampler_parent_after_fork() { g_lock.unlock(); }
void sampler_child_after_fork() {
    clear_locked();  // the parent's samples are not in the child's trace
    g_lock.unlock();
    t_sample_rng = mix(t_sample_rng ^ (static_cast<uint64_t>(getpid()) << 32) ^ now_ticks());
    if (!t_sample_rng) t_sample_rng = 1;
}

}  // namespace growtrace::preload
