#include "preload/capture/module_map.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "format/record_codec.h"
#include "format/records.h"

namespace growtrace::preload {
namespace {

constexpr int kMaxModules = 2048;
constexpr int kMaxSegments = 4;

struct Range {
    uint64_t begin, end;
};
struct Ranges {
    int count;
    Range range[kMaxModules * kMaxSegments];
};

struct Known {
    uint64_t base;
    uint64_t name_hash;
};

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
Known g_known[kMaxModules];
int g_known_count = 0;
unsigned long long g_last_adds = ~0ull, g_last_subs = ~0ull;
std::atomic<Ranges*> g_ranges{nullptr};
Ranges* g_spare = nullptr;  // the previously published array, reused by the next scan

uint64_t hash_name(const char* s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
    return h;
}

struct ScanState {
    RecordSink sink;
    bool reset;
    Ranges* ranges;
};

char g_exe[4096];  // module_map_program_path()

void read_build_id(const dl_phdr_info* info, const uint8_t*& id, size_t& size) {
    id = nullptr;
    size = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        auto* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
        const uint8_t* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const uint8_t* name = p + sizeof(*note);
            const uint8_t* desc = name + ((note->n_namesz + 3) & ~3u);
            if (desc + note->n_descsz > end) break;
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                id = desc;
                size = note->n_descsz;
                return;
            }
            p = desc + ((note->n_descsz + 3) & ~3u);
        }
    }
}

int visit(dl_phdr_info* info, size_t, void* data) {
    auto* state = static_cast<ScanState*>(data);
    const char* name = info->dlpi_name;
    // The main program has an empty name; the vDSO has no file to symbolise from.
    if (!name || !*name) name = g_exe;
    if (strncmp(name, "linux-vdso", 10) == 0) return 0;

    const uint8_t* build_id;
    size_t build_id_size;
    read_build_id(info, build_id, build_id_size);
    format::records::Segment segments[kMaxSegments];
    size_t count = 0;
    for (int i = 0; i < info->dlpi_phnum && count < kMaxSegments; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
        uint64_t begin = info->dlpi_addr + ph.p_vaddr;
        segments[count++] = {begin, ph.p_memsz};
        Ranges* r = state->ranges;
        if (r->count < kMaxModules * kMaxSegments) r->range[r->count++] = {begin, begin + ph.p_memsz};
    }
    format::records::Module module;
    module.base = info->dlpi_addr;
    module.path = format::Bytes::of(name);
    module.build_id = format::Bytes(build_id, build_id_size);
    module.segments = format::List<format::records::Segment>::of(segments, count);
    format::RecordEncoder rec(format::records::Module::kKind);
    format::encode(rec, module);

    uint64_t key = hash_name(name);
    for (int i = 0; i < g_known_count; ++i)
        if (g_known[i].base == info->dlpi_addr && g_known[i].name_hash == key) return 0;
    if (g_known_count < kMaxModules) g_known[g_known_count++] = {info->dlpi_addr, key};
    state->sink(rec);
    return 0;
}

int read_counters(dl_phdr_info* info, size_t size, void* data) {
    auto* out = static_cast<unsigned long long*>(data);
    if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        out[0] = info->dlpi_adds;
        out[1] = info->dlpi_subs;
    }
    return 1;
}

Ranges* take_ranges_buffer() {
    Ranges* r = g_spare;
    g_spare = nullptr;
    if (!r) {
        void* mem = mmap(nullptr, sizeof(Ranges), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) return nullptr;
        r = static_cast<Ranges*>(mem);
    }
    r->count = 0;
    return r;
}

}  // namespace

void module_map_scan(RecordSink sink, bool force) {
    unsigned long long counters[2] = {0, 0};
    dl_iterate_phdr(read_counters, counters);
    pthread_mutex_lock(&g_mutex);
    bool unloaded = counters[1] != g_last_subs && g_last_subs != ~0ull;
    if (force || counters[0] != g_last_adds || counters[1] != g_last_subs) {
        g_last_adds = counters[0];
        g_last_subs = counters[1];
        auto* state = static_cast<ScanState*>(
            mmap(nullptr, sizeof(ScanState), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        Ranges* ranges = take_ranges_buffer();
        if (state != MAP_FAILED && ranges) {
            state->sink = sink;
            state->ranges = ranges;
            module_map_program_path();
            if (unloaded) {
                g_known_count = 0;
                format::RecordEncoder reset(format::records::ModulesReset::kKind);
                sink(format::encode(reset, format::records::ModulesReset{0}));
            }
            dl_iterate_phdr(visit, state);
            // Two arrays in rotation. A reader racing with the reuse of the old one can get a
            // wrong answer, which only costs one extra scan or delays one by a tick.
            Ranges* old = g_ranges.exchange(ranges, std::memory_order_acq_rel);
            g_spare = old;
        }
        if (state != MAP_FAILED) munmap(state, sizeof(ScanState));
    }
    pthread_mutex_unlock(&g_mutex);
}

const char* module_map_program_path() {
    char now[sizeof g_exe];
    ssize_t n = readlink("/proc/self/exe", now, sizeof now - 1);
    if (n > 0) {
        memcpy(g_exe, now, static_cast<size_t>(n));
        g_exe[n] = '\0';
    }
    return g_exe;
}

void module_map_prepare_fork() { pthread_mutex_lock(&g_mutex); }
void module_map_parent_after_fork() { pthread_mutex_unlock(&g_mutex); }
void module_map_child_after_fork() { pthread_mutex_unlock(&g_mutex); }

void module_map_forget() {
    pthread_mutex_lock(&g_mutex);
    g_known_count = 0;
    g_last_adds = g_last_subs = ~0ull;
    pthread_mutex_unlock(&g_mutex);
}

void module_map_release() {
    module_map_forget();
    pthread_mutex_lock(&g_mutex);
    for (Ranges* r : {g_ranges.exchange(nullptr), g_spare})
        if (r) munmap(r, sizeof(Ranges));
    g_spare = nullptr;
    pthread_mutex_unlock(&g_mutex);
}

bool module_map_covers(uint64_t ip) {
    const Ranges* r = g_ranges.load(std::memory_order_acquire);
    if (!r) return false;
    for (int i = 0; i < r->count; ++i)
        if (ip >= r->range[i].begin && ip < r->range[i].end) return true;
    return false;
}

}  // namespace growtrace::preload
