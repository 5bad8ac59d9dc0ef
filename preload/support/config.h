// The tracer's settings, read once from the environment that `growtrace run` prepares
// (see docs/architecture.md for the variables).
#pragma once

namespace growtrace::preload {

struct Config {
    char output[4096] = {};
    bool follow_fork = true;
    bool follow_exec = true;
    unsigned tick_ms = 100;
    bool python_objects = true;  // PEP 445 hooks on CPython's object and "mem" allocators
    bool verify_stacks = false;  // tests: check each incremental Python stack against a full walk
    // Sampled mode: mean bytes between samples (GROWTRACE_SAMPLE); 0 = every allocation.
    unsigned long long sample_bytes = 0;
};

// "524288", "512K", "512k", "4M", "1G" (powers of 1024). False for anything else.
bool parse_byte_size(const char* text, unsigned long long& out);

Config read_config();

}  // namespace growtrace::preload
