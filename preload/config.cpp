#include "preload/config.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "preload/log.h"

namespace growtrace::preload {
namespace {
bool flag(const char* name, bool fallback) {
    const char* v = getenv(name);
    if (!v || !*v) return fallback;
    return !(strcmp(v, "0") == 0 || strcmp(v, "no") == 0 || strcmp(v, "false") == 0);
}
}  // namespace

bool parse_byte_size(const char* text, unsigned long long& out) {
    if (!text || *text < '0' || *text > '9') return false;
    char* end = nullptr;
    unsigned long long value = strtoull(text, &end, 10);
    unsigned shift = 0;
    switch (*end) {
        case 'k': case 'K': shift = 10; ++end; break;
        case 'm': case 'M': shift = 20; ++end; break;
        case 'g': case 'G': shift = 30; ++end; break;
        default: break;
    }
    if ((*end == 'b' || *end == 'B') && shift) ++end;
    if (*end != '\0' || value > (~0ull >> (shift + 2))) return false;
    out = value << shift;
    return true;
}

Config read_config() {
    Config c;
    const char* out = getenv("GROWTRACE_OUTPUT");
    if (out && *out) snprintf(c.output, sizeof c.output, "%s", out);
    else snprintf(c.output, sizeof c.output, "growtrace.%d.gtrace", static_cast<int>(getpid()));
    c.follow_fork = flag("GROWTRACE_FOLLOW_FORK", true);
    c.follow_exec = flag("GROWTRACE_FOLLOW_EXEC", true);
    c.python_objects = flag("GROWTRACE_PYTHON_OBJECTS", true);
    c.verify_stacks = flag("GROWTRACE_VERIFY_STACKS", false);
    if (const char* sample = getenv("GROWTRACE_SAMPLE"); sample && *sample) {
        if (!parse_byte_size(sample, c.sample_bytes)) {
            c.sample_bytes = 0;
            log_line("GROWTRACE_SAMPLE=%s is not a size in bytes (e.g. 524288 or 512K); tracing every allocation",
                     sample);
        }
    }
    if (const char* tick = getenv("GROWTRACE_TICK_MS")) {
        long ms = strtol(tick, nullptr, 10);
        if (ms >= 10 && ms <= 10000) c.tick_ms = static_cast<unsigned>(ms);
    }
    return c;
}

}  // namespace growtrace::preload
