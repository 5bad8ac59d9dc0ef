// Offline symbolization of native instruction pointers with libdw, from the module map
// recorded in the trace. Runs on the machine where the trace is analysed: module files are
// opened by the recorded path (debug info found the standard way: build-id, .debug dirs).
// A module that cannot be opened is not an error; its frames show as "??" plus the module. A
// frame in a module whose symbols do not cover it is named "nearest_function+0xoffset".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/read/records.h"

namespace growtrace {

struct Frame {
    uint64_t ip = 0;
    std::string function;     // demangled; "symbol+0x..." after the nearest symbol below when none
                              // covers ip; "??" if the module cannot be read; "0x..." if no module covers ip
    std::string file;         // source file, empty if unknown
    uint32_t line = 0;
    std::string module_path;  // full path, empty if no module covers ip
};

// Basename of a path ("/usr/lib/libc.so.6" -> "libc.so.6").
std::string path_basename(const std::string& path);

class Symbolizer {
public:
    Symbolizer();
    ~Symbolizer();
    Symbolizer(const Symbolizer&) = delete;
    Symbolizer& operator=(const Symbolizer&) = delete;

    // Registers a module seen in the trace in module-set generation `generation` (incremented
    // by each ModulesReset). Re-reporting an identical module is free.
    void add_module(const ModuleRecord& module, uint32_t generation);

    // Symbolizes a native ip. `return_address` is true for every frame but the innermost: the
    // call instruction is at ip - 1. `generation` picks among modules that covered the same
    // address at different times (dlclose + dlopen): the newest one not newer than it.
    const Frame& symbolize(uint64_t ip, bool return_address, uint32_t generation);

    // Warnings gathered so far (each reported once); cleared by the call.
    std::vector<std::string> take_warnings();

private:
    struct Module;
    Module* find_module(uint64_t ip, uint32_t generation);
    bool open_module(Module& m);
    Frame resolve(uint64_t ip, uint64_t lookup, Module* m);
    std::string nearest_function_name(Module& m, uint64_t ip, uint64_t lookup);

    std::vector<std::unique_ptr<Module>> modules_;
    std::unordered_map<std::string, Module*> by_identity_;
    std::unordered_map<uint64_t, Frame> cache_;  // key: ip ^ (generation-chosen module) hash
    std::vector<std::string> warnings_;
};

}  // namespace growtrace
