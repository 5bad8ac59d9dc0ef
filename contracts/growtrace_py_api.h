/* The contract between libgrowtrace.so (preload/) and the CPython agent (pyagent/).
 *
 * The preload library exports ONE symbol, growtrace_py_get_api(); the agent looks it up with
 * dlsym(RTLD_DEFAULT, ...) when it starts. No symbol = no tracer in this process: the agent
 * then writes JSON lines to $GROWTRACE_PYAGENT_LOG if set, else does nothing.
 *
 * Threading: every function is called by a thread that holds the GIL, except where noted.
 * Strings are (pointer, length), UTF-8, not NUL-terminated, valid only during the call.
 * Every struct starts with `size` = sizeof the struct as the caller compiled it, so fields
 * can be appended later without breaking either side (a reader treats missing fields as 0).
 *
 * Plain C (C99), usable from C++; no Python headers needed.
 */
#ifndef GROWTRACE_PY_API_H
#define GROWTRACE_PY_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GROWTRACE_PY_API_VERSION 1u

/* What the library does by itself, so the agent can skip its own fallback. */
#define GROWTRACE_PY_FEATURE_NATIVE_TYPE_HOOK  (1u << 0) /* PyType_Ready interposed: the agent
                                                            does not scan for new types */
#define GROWTRACE_PY_FEATURE_CACHE_SIZE_POLL   (1u << 1) /* the writer thread samples each
                                                            registered cache dict's ma_used */
#define GROWTRACE_PY_FEATURE_DICT_HOOK         (1u << 2) /* _PyDict_SetItem_KnownHash interposed:
                                                            stores into registered dicts of
                                                            pre-existing caches are seen */

/* cache_info.flags */
#define GROWTRACE_PY_CACHE_TYPED        (1u << 0) /* lru_cache(typed=True) */
#define GROWTRACE_PY_CACHE_PREEXISTING  (1u << 1) /* created before the agent started: found by
                                                     a heap scan, no probe, no creation stack */
#define GROWTRACE_PY_CACHE_METHOD       (1u << 2) /* bound as a class attribute, not a global */

typedef struct growtrace_py_agent_info {
    uint32_t size;
    uint32_t python_hexversion;    /* sys.hexversion */
    const char *agent_path; size_t agent_path_len;   /* the extension's file */
} growtrace_py_agent_info;

typedef struct growtrace_py_cache_info {
    uint32_t size;
    uint32_t flags;                /* GROWTRACE_PY_CACHE_* */
    uint64_t cache_id;             /* agent-assigned, unique in the process, never reused */
    uintptr_t wrapper;             /* id() of the functools._lru_cache_wrapper */
    uintptr_t cache_dict;          /* the dict holding the entries; its ma_used (offset 16 in
                                      CPython 3.11) is the entry count. Valid until
                                      cache_destroyed(cache_id). */
    int64_t maxsize;               /* -1 = unbounded (maxsize=None) */
    uint64_t creation_stack_id;    /* from capture_stack() when lru_cache(...) ran; 0 = unknown */
    uint64_t entries;              /* len(cache) now */
    const char *module; size_t module_len;        /* wrapped callable's __module__ */
    const char *qualname; size_t qualname_len;    /* wrapped callable's __qualname__ */
    const char *creator_module; size_t creator_module_len; /* module whose code called lru_cache */
    const char *creator_file; size_t creator_file_len;     /* ... its file and line */
    uint32_t creator_line;
    /* Names the wrapper is bound to, "module.name" or "module.Class.name", '\0'-separated. */
    const char *bound_names; size_t bound_names_len;
} growtrace_py_cache_info;

/* A miss of a probed cache. BEGIN is called before the wrapped function runs (the calling
 * thread's stack is the inserting stack), STORED/RAISED after it returns. Everything the
 * thread allocates between BEGIN and the matching end belongs to computing that entry
 * (innermost open miss wins). Misses nest (a cached function calling another). */
#define GROWTRACE_PY_MISS_BEGIN   0u
#define GROWTRACE_PY_MISS_STORED  1u   /* returned a value: the wrapper stores it */
#define GROWTRACE_PY_MISS_RAISED  2u   /* raised: nothing stored */

typedef struct growtrace_py_cache_insert {
    uint32_t size;
    uint32_t phase;                /* GROWTRACE_PY_MISS_* */
    uint64_t cache_id;
    uint64_t insert_seq;           /* 1-based per cache; BEGIN and its end carry the same */
    uint64_t entries_before;       /* len(cache) when the miss began */
    /* BEGIN only: a short description of the key, e.g.
       "(typing.Union[openai.types.responses.parsed_response.ParsedResponseOutputMessage[Fact], ...],)" */
    const char *key_desc; size_t key_desc_len;
    /* BEGIN only: id() of every class found in the key (depth <= 3), to join TypeCreate. */
    const uintptr_t *key_types; size_t key_type_count;
    /* end only: type name of the returned value ("" for RAISED) */
    const char *value_type; size_t value_type_len;
} growtrace_py_cache_insert;

#define GROWTRACE_PY_TYPE_FROM_NATIVE_HOOK 0u  /* seen by the library's PyType_Ready hook */
#define GROWTRACE_PY_TYPE_FROM_GC_SCAN     1u  /* found by the agent in GC generation 0 at the
                                                  start of a collection: created since the
                                                  previous one; its creating stack is the
                                                  allocation stack of `address` */
typedef struct growtrace_py_type_info {
    uint32_t size;
    uint32_t source;               /* GROWTRACE_PY_TYPE_FROM_* */
    uintptr_t address;             /* id() of the class */
    const char *module; size_t module_len;
    const char *qualname; size_t qualname_len;
    const char *metaclass; size_t metaclass_len;   /* "module.qualname" of type(cls) */
} growtrace_py_type_info;

struct growtrace_py_container;

typedef struct growtrace_py_api {
    uint32_t size;                 /* sizeof(growtrace_py_api) in the library */
    uint32_t version;              /* GROWTRACE_PY_API_VERSION of the library */
    uint32_t features;             /* GROWTRACE_PY_FEATURE_* */
    uint32_t reserved;
    /* The agent is running. The library re-checks its PEP 445 hooks here (PYTHONMALLOC or
       -X dev replace allocators during pre-initialisation) and re-installs them on top of
       whatever is current. Returns 0, or -1 if the library is not tracing. */
    int (*agent_attach)(const growtrace_py_agent_info *info);
    /* Interns the calling thread's current merged native+Python stack; returns its stack id
       (0 = not tracing). Frames inside the agent's extension and libgrowtrace are dropped. */
    uint64_t (*capture_stack)(void);
    void (*cache_created)(const growtrace_py_cache_info *info);
    void (*cache_insert)(const growtrace_py_cache_insert *insert);
    /* The wrapper is being destroyed (called from its weakref callback, before the dict is
       freed); stop reading cache_dict after this returns. */
    void (*cache_destroyed)(uint64_t cache_id);
    void (*type_created)(const growtrace_py_type_info *info);
    /* The program is about to exit (called from the agent's atexit callback, the last Python
       one to run, before the interpreter tears modules and caches down): what is freed after
       this is shutdown work, not the program's steady state. Present when `size` covers it. */
    void (*process_exiting)(void);
    /* A collection of the cyclic garbage collector starts or stops on the calling thread
       (phase GROWTRACE_PY_GC_*): the agent reports full collections (the oldest generation),
       from gc.callbacks, and the one it runs itself at the shutdown mark (flags
       GROWTRACE_PY_GC_AT_SHUTDOWN). What the thread frees in between is garbage being
       reclaimed. Present when `size` covers it. */
    void (*gc_collection)(uint32_t phase, uint32_t generation, uint32_t flags);
    /* One walk of the program's containers (docs/containers.md): the ones the agent tracks,
       with their entry counts now -> a ContainerWalk record in the calling thread's run.
       flags: GROWTRACE_PY_WALK_*. Present when `size` covers it. */
    void (*container_walk)(uint32_t flags, uint64_t walk_ns, const struct growtrace_py_container *items,
                           size_t count);
    /* At most once per writer tick (GROWTRACE_TICK_MS), until the shutdown mark, the library
       calls `tick` on the main thread, holding the GIL, from inside a Python allocation: it must
       not allocate or run Python code. The agent queues its next walk there with
       Py_AddPendingCall (from the main thread, the one place where CPython 3.10 to 3.12 act on
       a pending call at once). NULL stops it. Present when `size` covers it. */
    void (*set_tick)(void (*tick)(void));
    /* The calling thread's allocations are the agent's own (on = 1) or the program's again
       (on = 0) until further notice: a container walk is not the program's memory, though it
       runs inside the program's frames. Its frees are recorded either way: a program object the
       walk held the last reference to is freed by the walk. Returns the previous state. Present
       when `size` covers it. */
    int (*own_work)(int on);
} growtrace_py_api;

#define GROWTRACE_PY_WALK_HEAP_PASS  (1u << 0) /* this walk also looked through gc.get_objects() */
#define GROWTRACE_PY_WALK_FINAL      (1u << 1) /* the last walk, at the shutdown mark */
#define GROWTRACE_PY_WALK_TRACKED_ONLY (1u << 2) /* only the modules of containers already tracked, no heap pass */

/* container.kind */
#define GROWTRACE_PY_CONTAINER_DICT                 1u
#define GROWTRACE_PY_CONTAINER_LIST                 2u
#define GROWTRACE_PY_CONTAINER_SET                  3u
#define GROWTRACE_PY_CONTAINER_DEQUE                4u
#define GROWTRACE_PY_CONTAINER_WEAK_VALUE_DICT      5u
#define GROWTRACE_PY_CONTAINER_WEAK_KEY_DICT        6u
#define GROWTRACE_PY_CONTAINER_WEAK_SET             7u

/* One container as a walk found it. Addresses are the starts of heap blocks (the library turns
   them into the allocations that hold them). */
typedef struct growtrace_py_container {
    uint32_t size;
    uint32_t kind;                 /* GROWTRACE_PY_CONTAINER_* */
    uint64_t container_id;         /* agent-assigned, stable across walks */
    uint64_t entries;              /* len() now */
    uintptr_t table;               /* block holding its slots (dict keys, list items, set
                                      table), last reallocated by an insertion; 0 unknown */
    const uintptr_t *entry_blocks; size_t entry_block_count;  /* blocks of its newest entries */
    /* "module.NAME", "module.Class.attr", "module.obj.attr", or "<module.Type instance>.attr" */
    const char *name; size_t name_len;
    const char *owner_type; size_t owner_type_len;  /* "module.qualname" of the owning object */
    const char *key_types; size_t key_types_len;    /* '\0'-separated type names, newest first */
    const char *value_types; size_t value_types_len;
} growtrace_py_container;

#define GROWTRACE_PY_GC_START 0u
#define GROWTRACE_PY_GC_STOP  1u
#define GROWTRACE_PY_GC_AT_SHUTDOWN (1u << 0)

/* Exported by libgrowtrace.so. Returns NULL when the library implements an older version
   than min_version or is not tracing. */
const growtrace_py_api *growtrace_py_get_api(uint32_t min_version);
typedef const growtrace_py_api *(*growtrace_py_get_api_fn)(uint32_t min_version);

#ifdef __cplusplus
}
#endif
#endif /* GROWTRACE_PY_API_H */
