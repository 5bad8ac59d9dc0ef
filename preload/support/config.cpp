#include "preload/support/config.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "contracts/environment.h"
#include "contracts/trace_names.h"
#include "preload/support/log.h"

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
    const char* out = getenv(environment::kOutput);
    if (out && *out) snprintf(c.output, sizeof c.output, "%s", out);
    else trace_names::unnamed(static_cast<int>(getpid()), c.output, sizeof c.output);
    c.follow_fork = flag(environment::kFollowFork, true);
    c.follow_exec = flag(environment::kFollowExec, true);
    c.python_objects = flag(environment::kPythonObjects, true);
    c.verify_stacks = flag(environment::kVerifyStacks, false);
    if (const char* sample = getenv(environment::kSample); sample && *sample) {
        if (!parse_byte_size(sample, c.sample_bytes)) {
            c.sample_bytes = 0;
            log_line("%s=%s is not a size in bytes (e.g. 524288 or 512K); tracing every allocation",
                     environment::kSample, sample);
        }
    }
    if (const char* tick = getenv(environment::kTickMs)) {
        long ms = strtol(tick, nullptr, 10);
        if (ms >= 10 && ms <= 10000) c.tick_ms = static_cast<unsigned>(ms);
    }
    return c;
}

}  // namespace growtrace::preload
