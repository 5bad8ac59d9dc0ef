#include "preload/support/got_patcher.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace growtrace::preload {
namespace {

constexpr int kMaxTargets = 32;  // every hook (attach mode)
constexpr int kMaxObjects = 4096;
constexpr int kMaxSlots = 32768;

struct Object {
    unsigned long base;
    uint64_t name_hash;
    bool seen;
};
struct Slot {
    void** address;
    void* original;
    void* replacement;
    int object;  // index in g_objects
};

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
Object g_objects[kMaxObjects];
int g_object_count = 0;
Slot g_slots[kMaxSlots];
int g_slot_count = 0;
unsigned long long g_last_adds = ~0ull, g_last_subs = ~0ull;
int g_slot_limit = kMaxSlots;  // lowered by got_patcher_limit_slots_for_test

uint64_t hash_name(const char* s) {
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
    return h;
}

const char* base_name(const char* path) {
    const char* slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

// The loader allocates through pointers it set at start-up (__rtld_malloc), not its GOT, and
// the vDSO has no GOT: neither table is ours to touch.
bool never_patch(const char* path) {
    const char* name = base_name(path);
    return strncmp(name, "ld-linux", 8) == 0 || strncmp(name, "ld.so", 5) == 0 ||
           strncmp(name, "linux-vdso", 10) == 0 || strncmp(name, "linux-gate", 10) == 0;
}

// libc's GOT holds malloc, free, calloc and realloc (glibc 2.36: GLOB_DAT and JUMP_SLOT), which
// its own code calls through; its other slots (none of fork, exit or exec's in 2.36) stay: a
// process hook reached from inside libc would see libc's internal calls as the program's.
bool is_libc(const char* path) { return strncmp(base_name(path), "libc.so", 7) == 0; }

int find_object(unsigned long base, uint64_t name_hash) {
    for (int i = 0; i < g_object_count; ++i)
        if (g_objects[i].base == base && g_objects[i].name_hash == name_hash) return i;
    return -1;
}

// The read-only-after-relocation range of an object, page aligned as the loader protects it.
struct Relro {
    uintptr_t begin = 0, end = 0;
    bool contains(const void* p) const {
        auto a = reinterpret_cast<uintptr_t>(p);
        return a >= begin && a < end;
    }
};

Relro relro_of(const dl_phdr_info* info) {
    Relro r;
    uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_GNU_RELRO) continue;
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        r.begin = start & ~(page - 1);
        r.end = (start + ph.p_memsz) & ~(page - 1);
    }
    return r;
}

// Stores `value` into `slot`, making a RELRO page writable around the store.
void store_slot(void** slot, void* value, const Relro& relro) {
    if (!relro.contains(slot)) {
        __atomic_store_n(slot, value, __ATOMIC_RELEASE);
        return;
    }
    uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    void* start = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(slot) & ~(page - 1));
    if (mprotect(start, page, PROT_READ | PROT_WRITE) != 0) return;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    mprotect(start, page, PROT_READ);
}

struct PatchScan {
    const GotTarget* targets;
    int count;
    void* global[kMaxTargets];  // the process-wide definition of each target
    unsigned long self_base;
    int patched;
    bool full;
    bool libc;  // the object being patched is libc: only targets marked in_libc
};

struct DynamicInfo {
    const ElfW(Rela)* jmprel = nullptr;
    size_t jmprel_size = 0;
    const ElfW(Rela)* rela = nullptr;
    size_t rela_size = 0;
    const ElfW(Sym)* symtab = nullptr;
    const char* strtab = nullptr;
    bool plt_is_rela = true;
};

bool read_dynamic(const dl_phdr_info* info, DynamicInfo& out) {
    const ElfW(Dyn)* dyn = nullptr;
    for (int i = 0; i < info->dlpi_phnum; ++i)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return false;
    // The loader rewrites d_ptr entries to absolute addresses on x86-64; be safe if it did not.
    auto address = [info](ElfW(Addr) v) -> uintptr_t { return v < info->dlpi_addr ? v + info->dlpi_addr : v; };
    for (; dyn->d_tag != DT_NULL; ++dyn) {
        switch (dyn->d_tag) {
            case DT_JMPREL: out.jmprel = reinterpret_cast<const ElfW(Rela)*>(address(dyn->d_un.d_ptr)); break;
            case DT_PLTRELSZ: out.jmprel_size = dyn->d_un.d_val; break;
            case DT_PLTREL: out.plt_is_rela = dyn->d_un.d_val == DT_RELA; break;
            case DT_RELA: out.rela = reinterpret_cast<const ElfW(Rela)*>(address(dyn->d_un.d_ptr)); break;
            case DT_RELASZ: out.rela_size = dyn->d_un.d_val; break;
            case DT_SYMTAB: out.symtab = reinterpret_cast<const ElfW(Sym)*>(address(dyn->d_un.d_ptr)); break;
            case DT_STRTAB: out.strtab = reinterpret_cast<const char*>(address(dyn->d_un.d_ptr)); break;
            default: break;
        }
    }
    return out.symtab && out.strtab && out.plt_is_rela;
}

// Is `p` inside one of the object's loaded segments (an unresolved lazy-binding stub)?
bool inside_object(const dl_phdr_info* info, const void* p) {
    auto a = reinterpret_cast<uintptr_t>(p);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        if (a >= start && a < start + ph.p_memsz) return true;
    }
    return false;
}

void patch_table(const dl_phdr_info* info, const DynamicInfo& dyn, const ElfW(Rela)* table, size_t bytes,
                 int object, PatchScan& scan) {
    if (!table) return;
    size_t n = bytes / sizeof(ElfW(Rela));
    for (size_t i = 0; i < n; ++i) {
        unsigned type = ELF64_R_TYPE(table[i].r_info);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
        size_t sym = ELF64_R_SYM(table[i].r_info);
        if (sym == 0) continue;
        const char* name = dyn.strtab + dyn.symtab[sym].st_name;
        for (int t = 0; t < scan.count; ++t) {
            if (scan.libc && !scan.targets[t].in_libc) continue;
            if (name[0] != scan.targets[t].name[0] || strcmp(name, scan.targets[t].name) != 0) continue;
            auto** slot = reinterpret_cast<void**>(info->dlpi_addr + table[i].r_offset);
            void* current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
            if (current == scan.targets[t].replacement) break;
            if (current != scan.global[t] && !inside_object(info, current)) break;  // bound elsewhere
            if (g_slot_count == g_slot_limit) {
                scan.full = true;
                return;
            }
            // Only noted here: the slots are written once the whole scan fits (commit_object).
            g_slots[g_slot_count++] = {slot, current, scan.targets[t].replacement, object};
            ++scan.patched;
            break;
        }
    }
}

int patch_object(dl_phdr_info* info, size_t, void* arg) {
    auto& scan = *static_cast<PatchScan*>(arg);
    g_last_adds = info->dlpi_adds;
    g_last_subs = info->dlpi_subs;
    uint64_t name_hash = hash_name(info->dlpi_name);
    int known = find_object(info->dlpi_addr, name_hash);
    if (known >= 0) {
        g_objects[known].seen = true;
        return 0;
    }
    if (g_object_count == kMaxObjects) {
        scan.full = true;
        return 0;
    }
    int object = g_object_count++;
    g_objects[object] = {info->dlpi_addr, name_hash, true};
    if (info->dlpi_addr == scan.self_base || (info->dlpi_name && never_patch(info->dlpi_name))) return 0;
    DynamicInfo dyn;
    if (!read_dynamic(info, dyn)) return 0;
    scan.libc = info->dlpi_name && is_libc(info->dlpi_name);
    patch_table(info, dyn, dyn.jmprel, dyn.jmprel_size, object, scan);
    patch_table(info, dyn, dyn.rela, dyn.rela_size, object, scan);
    return 0;
}

// Writes the slots noted by this scan (from `first` on) of the objects still loaded: under the
// loader's lock again, since an object may have been unloaded since it was scanned.
struct CommitScan {
    int first;
};

int commit_object(dl_phdr_info* info, size_t, void* arg) {
    const auto& scan = *static_cast<CommitScan*>(arg);
    int object = find_object(info->dlpi_addr, hash_name(info->dlpi_name));
    if (object < 0) return 0;
    Relro relro = relro_of(info);
    for (int i = scan.first; i < g_slot_count; ++i)
        if (g_slots[i].object == object) store_slot(g_slots[i].address, g_slots[i].replacement, relro);
    return 0;
}

// Forgets objects that were unloaded (their slots went with them), renumbering the rest.
void drop_unseen_objects() {
    int remap[kMaxObjects];
    int kept = 0;
    for (int i = 0; i < g_object_count; ++i) {
        remap[i] = g_objects[i].seen ? kept : -1;
        if (g_objects[i].seen) g_objects[kept++] = g_objects[i];
    }
    g_object_count = kept;
    int slots = 0;
    for (int i = 0; i < g_slot_count; ++i) {
        if (remap[g_slots[i].object] < 0) continue;
        g_slots[slots] = g_slots[i];
        g_slots[slots++].object = remap[g_slots[i].object];
    }
    g_slot_count = slots;
}

int count_adds(dl_phdr_info* info, size_t, void* arg) {
    auto* counters = static_cast<unsigned long long*>(arg);
    counters[0] = info->dlpi_adds;
    counters[1] = info->dlpi_subs;
    return 1;  // the counters are the same in every entry
}

struct RestoreScan {
    int restored;
};

int restore_object(dl_phdr_info* info, size_t, void* arg) {
    auto& scan = *static_cast<RestoreScan*>(arg);
    int object = find_object(info->dlpi_addr, hash_name(info->dlpi_name));
    if (object < 0) return 0;
    Relro relro = relro_of(info);
    for (int i = 0; i < g_slot_count; ++i) {
        Slot& s = g_slots[i];
        if (s.object != object) continue;
        if (__atomic_load_n(s.address, __ATOMIC_ACQUIRE) != s.replacement) continue;  // rebound since
        store_slot(s.address, s.original, relro);
        ++scan.restored;
    }
    return 0;
}

}  // namespace

void got_patcher_child_after_fork() { pthread_mutex_init(&g_mutex, nullptr); }

int got_patch_loaded(const GotTarget* targets, int count, unsigned long self_base, bool all_or_nothing) {
    if (count > kMaxTargets) count = kMaxTargets;
    PatchScan scan{targets, count, {}, self_base, 0, false, false};
    for (int t = 0; t < count; ++t) scan.global[t] = dlsym(RTLD_DEFAULT, targets[t].name);
    pthread_mutex_lock(&g_mutex);
    unsigned long long counters[2] = {0, 0};
    dl_iterate_phdr(count_adds, counters);
    if (counters[0] == g_last_adds && counters[1] == g_last_subs) {
        pthread_mutex_unlock(&g_mutex);
        return 0;
    }
    for (int i = 0; i < g_object_count; ++i) g_objects[i].seen = false;
    int first = g_slot_count;
    dl_iterate_phdr(patch_object, &scan);
    if (scan.full && all_or_nothing) {
        g_slot_count = first;  // nothing written
        scan.patched = 0;
    } else {
        CommitScan commit{first};
        dl_iterate_phdr(commit_object, &commit);
    }
    drop_unseen_objects();
    pthread_mutex_unlock(&g_mutex);
    return scan.full ? -1 : scan.patched;
}

void got_patcher_limit_slots_for_test(int limit) {
    pthread_mutex_lock(&g_mutex);
    g_slot_limit = limit > 0 && limit < kMaxSlots ? limit : kMaxSlots;
    pthread_mutex_unlock(&g_mutex);
}

int got_restore_all() {
    RestoreScan scan{0};
    pthread_mutex_lock(&g_mutex);
    dl_iterate_phdr(restore_object, &scan);
    g_object_count = 0;
    g_slot_count = 0;
    g_last_adds = g_last_subs = ~0ull;
    pthread_mutex_unlock(&g_mutex);
    return scan.restored;
}

namespace {
struct Redirect {
    uintptr_t address;
    const char* name;
    void* replacement;
    int changed;
};

void redirect_table(const dl_phdr_info* info, const DynamicInfo& dyn, const ElfW(Rela)* table, size_t bytes,
                    const Relro& relro, Redirect& r) {
    if (!table) return;
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
        unsigned type = ELF64_R_TYPE(table[i].r_info);
        size_t sym = ELF64_R_SYM(table[i].r_info);
        if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || sym == 0) continue;
        if (strcmp(dyn.strtab + dyn.symtab[sym].st_name, r.name) != 0) continue;
        store_slot(reinterpret_cast<void**>(info->dlpi_addr + table[i].r_offset), r.replacement, relro);
        ++r.changed;
    }
}

int redirect_object(dl_phdr_info* info, size_t, void* arg) {
    auto& r = *static_cast<Redirect*>(arg);
    if (!inside_object(info, reinterpret_cast<const void*>(r.address))) return 0;
    DynamicInfo dyn;
    if (read_dynamic(info, dyn)) {
        Relro relro = relro_of(info);
        redirect_table(info, dyn, dyn.jmprel, dyn.jmprel_size, relro, r);
        redirect_table(info, dyn, dyn.rela, dyn.rela_size, relro, r);
    }
    return 1;
}
}  // namespace

int got_redirect_in_object(const void* address, const char* name, void* replacement) {
    Redirect r{reinterpret_cast<uintptr_t>(address), name, replacement, 0};
    dl_iterate_phdr(redirect_object, &r);
    return r.changed;
}

int got_patched_count() {
    pthread_mutex_lock(&g_mutex);
    int n = g_slot_count;
    pthread_mutex_unlock(&g_mutex);
    return n;
}

}  // namespace growtrace::preload
