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
};

Config read_config();

}  // namespace growtrace::preload
