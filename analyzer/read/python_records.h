// Decoded CPython records (kinds 0x30-0x35, docs/cpython.md): caches announced by the Python
// agent, their misses, their sizes, and classes created at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace growtrace {

struct CacheCreateRecord {
    uint64_t tid = 0;
    uint64_t ticks = 0;
    uint64_t cache_id = 0;
    uint64_t flags = 0;
    int64_t maxsize = -1;  // -1 = unbounded
    uint64_t wrapper_address = 0;
    uint64_t dict_address = 0;
    uint64_t creation_stack_id = 0;
    uint64_t entries = 0;
    std::string module, qualname;  // of the wrapped callable
    std::string creator_module, creator_file;
    uint64_t creator_line = 0;
    std::vector<std::string> bound_names;
};

struct CacheInsertRecord {
    enum Phase : uint64_t { Begin = 0, Stored = 1, Raised = 2 };
    uint64_t tid = 0;
    uint64_t ticks = 0;
    uint64_t phase = Begin;
    uint64_t cache_id = 0;
    uint64_t insert_seq = 0;
    // Begin only.
    uint64_t stack_id = 0;
    uint64_t entries_before = 0;
    std::string key_desc;
    std::vector<uint64_t> key_type_addresses;
    // Stored/Raised only.
    std::string value_type;
};

struct CacheSizeRecord {
    uint64_t ticks = 0;
    std::vector<std::pair<uint64_t, int64_t>> entries;  // cache_id, entries (-1 = destroyed)
};

// Misses of caches with a maxsize, counted by the writer of a sampled trace (version 4) over a
// window instead of written one by one: what the per-miss records would have told about them.
struct CacheMissCounts {
    uint64_t cache_id = 0;
    uint64_t misses = 0;
    uint64_t stored = 0;
    uint64_t first_ticks = 0;  // begin of the first miss counted
    uint64_t last_ticks = 0;   // begin of the last one
    uint64_t first_entries_before = 0;
    uint64_t last_entries_after = 0;  // entries once the last one ended (one more if stored)
    std::vector<std::pair<uint64_t, uint64_t>> stacks;  // inserting stack id, misses
};

struct CacheMissesRecord {
    uint64_t ticks = 0;
    std::vector<CacheMissCounts> caches;
};

struct TypeCreateRecord {
    uint64_t tid = 0;
    uint64_t ticks = 0;
    uint64_t source = 0;  // 0 PyType_Ready hook, 1 agent gc scan
    uint64_t address = 0;
    uint64_t stack_id = 0;  // 0: use the stack of the allocation holding the class
    std::string module, qualname, metaclass;
    uint64_t allocation_seq = 0;  // AllocCompact holding the class object (v2), 0 unknown
};

// A full collection of the cyclic garbage collector starting or stopping on a thread.
struct CollectionRecord {
    enum Phase : uint64_t { Start = 0, Stop = 1 };
    enum Flags : uint64_t { AtShutdown = 1 };
    uint64_t tid = 0;
    uint64_t ticks = 0;
    uint64_t phase = Start;
    uint64_t generation = 0;
    uint64_t flags = 0;
};

// One container as one of the agent's walks found it (kind 0x36, docs/containers.md).
struct ContainerRecord {
    enum Kind : uint64_t { Dict = 1, List = 2, Set = 3, Deque = 4, WeakValueDict = 5, WeakKeyDict = 6, WeakSet = 7 };
    enum Flags : uint64_t { HeapPass = 1, Final = 2 };
    uint64_t tid = 0;
    uint64_t ticks = 0;
    uint64_t walk_seq = 0;
    uint64_t flags = 0;
    uint64_t walk_ns = 0;
    uint64_t container_id = 0;
    uint64_t kind = 0;
    uint64_t entries = 0;
    std::string name, owner_type;
    std::vector<std::string> key_types, value_types;  // of its newest entries, newest first
    // Allocations (AllocCompact sequence numbers, 0 unknown) of its slots' block and of its
    // newest entries' objects.
    uint64_t table_allocation = 0;
    std::vector<uint64_t> entry_allocations;
};

}  // namespace growtrace
