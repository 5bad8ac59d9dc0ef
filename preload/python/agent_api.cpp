#include "preload/python/agent_api.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "contracts/growtrace_py_api.h"
#include "format/record_codec.h"
#include "format/records.h"
#include "preload/support/clock.h"
#include "preload/cpython/checked_read.h"
#include "preload/cpython/interpreter.h"
#include "preload/python/python_allocator.h"
#include "preload/python/walk_request.h"
#include "preload/record/recorder.h"
#include "preload/session/session.h"
#include "preload/support/recursion_guard.h"
#include "preload/write/writer.h"

namespace growtrace::preload::python {
namespace {

using format::Bytes;
using format::RecordEncoder;
namespace records = format::records;

// Address range of the agent's extension, whose frames are dropped from the stacks it asks for.
uint64_t g_agent_begin = 0, g_agent_end = 0;

struct WatchedCache {
    uint64_t id;
    const void* dict;  // a dict object
    int64_t last_entries;
};
constexpr int kMaxWatchedCaches = 4096;
pthread_mutex_t g_caches_mutex = PTHREAD_MUTEX_INITIALIZER;
WatchedCache g_caches[kMaxWatchedCaches];
int g_cache_count = 0;
// Set at the shutdown mark, after a last poll: from then on the interpreter frees the caches'
// dicts (and unmaps their memory), and sizes read then would decide nothing anyway.
bool g_caches_frozen = false;

struct RangeQuery {
    const char* path;
    size_t path_len;
};

int find_agent(dl_phdr_info* info, size_t, void* data) {
    auto* q = static_cast<RangeQuery*>(data);
    if (!info->dlpi_name || strlen(info->dlpi_name) != q->path_len ||
        memcmp(info->dlpi_name, q->path, q->path_len) != 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
            g_agent_begin = info->dlpi_addr + ph.p_vaddr;
            g_agent_end = g_agent_begin + ph.p_memsz;
        }
    }
    return 1;
}

// A thread event: its fields after the dticks, which the recorder puts first (the run's clock).
template <class R>
void emit(const R& record) {
    RecordEncoder body(R::kKind);
    format::encode_after_dticks(body, record);
    record_thread_event(R::kKind, body.payload(), body.payload_size());
}

// One container of a walk: its table's block (if any) and up to 16 of its entries' blocks, as
// addresses the writer turns into allocations (TraceCompactor::container_allocations), and
// the entries naming their blocks by index.
records::Container container_record(const growtrace_py_container& c, uint64_t walk_seq, uint32_t flags,
                                     uint64_t walk_ns) {
    const size_t blocks = std::min<size_t>(c.entry_block_count, 16);
    records::Container r;
    r.allocations = format::List<records::ContainerAllocation>::produced(
        (c.table != 0) + blocks, &c, [](const void* context, size_t i, records::ContainerAllocation& out) {
            const auto& container = *static_cast<const growtrace_py_container*>(context);
            out.allocation = container.table ? (i == 0 ? container.table : container.entry_blocks[i - 1])
                                             : container.entry_blocks[i];
        });
    r.walk_seq = walk_seq;
    r.flags = flags;
    r.walk_ns = walk_ns;
    r.container_id = c.container_id;
    r.kind = c.kind;
    r.entries = c.entries;
    r.table = c.table ? 1 : 0;
    r.name = Bytes(c.name, c.name_len);
    r.owner_type = Bytes(c.owner_type, c.owner_type_len);
    r.key_types = Bytes(c.key_types, c.key_types_len);
    r.value_types = Bytes(c.value_types, c.value_types_len);
    r.newest_entries = format::List<records::ContainerEntry>::produced(
        blocks, &c, [](const void* context, size_t e, records::ContainerEntry& out) {
            out.entry = (static_cast<const growtrace_py_container*>(context)->table != 0) + e + 1;
        });
    return r;
}

int agent_attach(const growtrace_py_agent_info* info) {
    if (!tracer_active()) return -1;
    if (info && info->agent_path) {
        RangeQuery q{info->agent_path, info->agent_path_len};
        dl_iterate_phdr(find_agent, &q);
    }
    install_allocator_hooks();
    return 0;
}

uint64_t capture_stack_api() { return record_stack(g_agent_begin, g_agent_end); }

void cache_created(const growtrace_py_cache_info* c) {
    RecursionGuard guard;
    records::CacheCreate r;
    r.cache_id = c->cache_id;
    r.flags = c->flags;
    r.maxsize = c->maxsize;
    r.wrapper_address = c->wrapper;
    r.dict_address = c->cache_dict;
    r.creation_stack_id = c->creation_stack_id;
    r.entries = c->entries;
    r.module = Bytes(c->module, c->module_len);
    r.qualname = Bytes(c->qualname, c->qualname_len);
    r.creator_module = Bytes(c->creator_module, c->creator_module_len);
    r.creator_file = Bytes(c->creator_file, c->creator_file_len);
    r.creator_line = c->creator_line;
    r.bound_names = Bytes(c->bound_names, c->bound_names_len);
    emit(r);
    if (!c->cache_dict) return;
    pthread_mutex_lock(&g_caches_mutex);
    int i = 0;
    while (i < g_cache_count && g_caches[i].id != c->cache_id) ++i;
    if (i < kMaxWatchedCaches) {
        g_caches[i] = {c->cache_id, reinterpret_cast<const void*>(c->cache_dict),
                       static_cast<int64_t>(c->entries)};
        if (i == g_cache_count) ++g_cache_count;
    }
    pthread_mutex_unlock(&g_caches_mutex);
}

void cache_insert(const growtrace_py_cache_insert* ins) {
    RecursionGuard guard;
    static_assert(GROWTRACE_PY_MISS_BEGIN == records::CacheInsert::kBegin);
    records::CacheInsert r;
    r.phase = ins->phase;
    r.cache_id = ins->cache_id;
    r.insert_seq = ins->insert_seq;
    if (ins->phase == GROWTRACE_PY_MISS_BEGIN) {
        r.stack_id = capture_stack_api();
        r.entries_before = ins->entries_before;
        r.key_desc = Bytes(ins->key_desc, ins->key_desc_len);
        r.key_type_addresses = format::List<records::KeyTypeAddress>::produced(
            ins->key_type_count, ins, [](const void* context, size_t i, records::KeyTypeAddress& out) {
                out.key_type_address = static_cast<const growtrace_py_cache_insert*>(context)->key_types[i];
            });
    } else {
        r.value_type = Bytes(ins->value_type, ins->value_type_len);
    }
    emit(r);
}

void cache_destroyed(uint64_t cache_id) {
    pthread_mutex_lock(&g_caches_mutex);
    for (int i = 0; i < g_cache_count; ++i) {
        if (g_caches[i].id != cache_id) continue;
        g_caches[i].dict = nullptr;  // reported as destroyed by the next poll
        break;
    }
    pthread_mutex_unlock(&g_caches_mutex);
}

void emit_type(uint32_t source, uint64_t address, uint64_t stack_id, const char* module, size_t module_len,
               const char* qualname, size_t qualname_len, const char* meta, size_t meta_len) {
    records::TypeCreate r;
    r.source = source;
    r.address = address;
    r.stack_id = stack_id;
    r.module = Bytes(module, module_len);
    r.qualname = Bytes(qualname, qualname_len);
    r.metaclass = Bytes(meta, meta_len);
    emit(r);
}

void type_created(const growtrace_py_type_info* t) {
    RecursionGuard guard;
    emit_type(t->source, t->address, 0, t->module, t->module_len, t->qualname, t->qualname_len, t->metaclass,
              t->metaclass_len);
}

void gc_collection(uint32_t phase, uint32_t generation, uint32_t flags) {
    RecursionGuard guard;
    emit(records::Collection{0, phase, generation, flags});
}

// One record per container: the block addresses first (the writer turns them into
// allocations, see TraceCompactor::container_allocations), then the container naming them by
// index.
void container_walk(uint32_t flags, uint64_t walk_ns, const growtrace_py_container* items, size_t count) {
    RecursionGuard guard;
    static uint64_t walk_seq = 0;  // under the GIL
    ++walk_seq;
    for (size_t i = 0; i < count; ++i) {
        emit(container_record(items[i], walk_seq, flags, walk_ns));
    }
}

// The agent's request for its next walk: called on the main thread, holding the GIL, from an
// allocation hook (it must not allocate: it only queues a pending call).
void set_tick(void (*tick)(void)) { set_walk_tick(tick); }

int own_work(int on) {
    const bool was = t_agent_work;
    t_agent_work = on != 0;
    return was;
}

// The agent has run its full collection just before: the sizes polled here, and everything
// the analyzer measures at this mark, are what the program holds, not garbage.
void process_exiting() {
    poll_cache_sizes(writer_emit, true);  // the sizes the program leaves behind
    pthread_mutex_lock(&g_caches_mutex);
    g_caches_frozen = true;
    pthread_mutex_unlock(&g_caches_mutex);
    stop_walks();
    g_session.program_exiting();
}

growtrace_py_api g_api_table = {
    sizeof(growtrace_py_api), GROWTRACE_PY_API_VERSION, GROWTRACE_PY_FEATURE_CACHE_SIZE_POLL, 0,
    agent_attach, capture_stack_api, cache_created, cache_insert, cache_destroyed, type_created,
    process_exiting, gc_collection, container_walk, set_tick, own_work,
};

using TypeReadyFn = int (*)(void*);

// A class just made ready: its module, qualified name and metaclass, read from its own storage
// (no attribute lookup, which could run the program's code), never a read that could fault.
// Anything that is not a heap type whose fields can be read (a static type, one that Cython
// flags as a heap type while it is made ready, one half built by C code) is left out.
void record_heap_type(const void* type) {
    ClassNames names;
    if (!checked_reads_work() || !read_ready_class_names(type, names)) return;  // else the agent's gc scan names it
    uint64_t stack = capture_stack_api();
    emit_type(GROWTRACE_PY_TYPE_FROM_NATIVE_HOOK, reinterpret_cast<uint64_t>(type), stack, names.module,
              names.module_len, names.qualname, names.qualname_len, names.metaclass, names.metaclass_len);
}

}  // namespace

namespace {
// A racy read of one aligned word (the writer does not hold the GIL): at worst a count one
// insertion old.
int64_t entries_of(const void* dict) {
    auto* used = reinterpret_cast<const int64_t*>(static_cast<const char*>(dict) + layout().dict_used);
    return __atomic_load_n(used, __ATOMIC_RELAXED);
}
}  // namespace

void poll_cache_sizes(void (*sink)(const RecordEncoder&), bool every_cache) {
    // The time is read before the sizes: the program runs on while this thread reads them (and
    // may be descheduled), and a size stamped later than it was read would place, say, a full
    // cache after the frees of the clear() that emptied it.
    const uint64_t ticks = now_ticks();
    size_t changed = 0;
    records::CacheEntries sizes[kMaxWatchedCaches];
    pthread_mutex_lock(&g_caches_mutex);
    for (int i = 0; i < g_cache_count && !g_caches_frozen; ++i) {
        WatchedCache& c = g_caches[i];
        if (c.last_entries < 0) continue;  // destroyed and reported
        int64_t now = c.dict ? entries_of(c.dict) : -1;
        if (now == c.last_entries && !every_cache) continue;
        c.last_entries = now;
        sizes[changed++] = {c.id, now};
    }
    pthread_mutex_unlock(&g_caches_mutex);
    want_walk();
    if (!changed) return;
    RecordEncoder rec(records::CacheSize::kKind);
    sink(format::encode(rec, records::CacheSize{ticks, format::List<records::CacheEntries>::of(sizes, changed)}));
}

void forget_caches() {
    g_cache_count = 0;
    g_caches_frozen = false;
    allow_walks();
    pthread_mutex_init(&g_caches_mutex, nullptr);
}

}  // namespace growtrace::preload::python

using namespace growtrace::preload;

// Our own definition, reached without the GOT: `&PyType_Ready` in this library would resolve to
// the first definition in the process, which in a static Python is the executable's.
extern "C" int growtrace_type_ready_local(void*) __attribute__((alias("PyType_Ready"), visibility("hidden")));

namespace growtrace::preload::python {
namespace {
TypeReadyFn real_type_ready() {
    static TypeReadyFn real = [] {
        auto fn = reinterpret_cast<TypeReadyFn>(dlsym(RTLD_NEXT, "PyType_Ready"));
        if (!fn) fn = reinterpret_cast<TypeReadyFn>(dlsym(RTLD_DEFAULT, "PyType_Ready"));
        return reinterpret_cast<void*>(fn) == reinterpret_cast<void*>(&growtrace_type_ready_local) ? nullptr : fn;
    }();
    return real;
}
}  // namespace
}  // namespace growtrace::preload::python

// Every class statement and type() call ends in PyType_Ready. Where libpython is a shared
// library its internal calls go through the PLT and reach this definition first; in a Python
// linked into its executable they do not, and the agent's gc scan reports classes instead.
extern "C" __attribute__((visibility("default"))) int PyType_Ready(void* type) {
    python::TypeReadyFn real = python::real_type_ready();
    if (!real) return -1;
    int rc = real(type);
    if (rc == 0 && type && program_allocates() && tracer_active() && python::present()) python::record_heap_type(type);
    return rc;
}

// The program begins to exit, for an interpreter the agent cannot run in: sitecustomize.py
// registers this with atexit through ctypes, so that memory the interpreter frees at exit is
// still counted as held, as the agent's own atexit callback does elsewhere.
extern "C" __attribute__((visibility("default"))) void growtrace_program_exiting() { g_session.program_exiting(); }

extern "C" __attribute__((visibility("default"))) const growtrace_py_api* growtrace_py_get_api(uint32_t min_version) {
    // The agent is the running interpreter's own build; it is refused where the library
    // cannot read that interpreter (its layout is unknown, so neither can be trusted).
    if (min_version > GROWTRACE_PY_API_VERSION || !tracer_active() || !python::present()) return nullptr;
    // The hook names classes only with checked reads; where the kernel refuses them (seccomp),
    // the agent's gc scan reports the classes instead.
    static const bool type_hook =
        dlsym(RTLD_DEFAULT, "PyType_Ready") == reinterpret_cast<void*>(&growtrace_type_ready_local) &&
        python::checked_reads_work();
    if (type_hook) python::g_api_table.features |= GROWTRACE_PY_FEATURE_NATIVE_TYPE_HOOK;
    return &python::g_api_table;
}
