#include "preload/config.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace growtrace::preload {
namespace {
bool flag(const char* name, bool fallback) {
    const char* v = getenv(name);
    if (!v || !*v) return fallback;
    return !(strcmp(v, "0") == 0 || strcmp(v, "no") == 0 || strcmp(v, "false") == 0);
}
}  // namespace

Config read_config() {
    Config c;
    const char* out = getenv("GROWTRACE_OUTPUT");
    if (out && *out) snprintf(c.output, sizeof c.output, "%s", out);
    else snprintf(c.output, sizeof c.output, "growtrace.%d.gtrace", static_cast<int>(getpid()));
    c.follow_fork = flag("GROWTRACE_FOLLOW_FORK", true);
    c.follow_exec = flag("GROWTRACE_FOLLOW_EXEC", true);
    c.python_objects = flag("GROWTRACE_PYTHON_OBJECTS", true);
    c.verify_stacks = flag("GROWTRACE_VERIFY_STACKS", false);
    if (const char* tick = getenv("GROWTRACE_TICK_MS")) {
        long ms = strtol(tick, nullptr, 10);
        if (ms >= 10 && ms <= 10000) c.tick_ms = static_cast<unsigned>(ms);
    }
    return c;
}

}  // namespace growtrace::preload
