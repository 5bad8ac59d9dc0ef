#include "preload/support/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>

namespace growtrace::preload {
namespace {
constexpr int kMaxMessages = 20;
std::atomic<int> g_messages{0};
}  // namespace

void log_line(const char* fmt, ...) {
    if (g_messages.fetch_add(1, std::memory_order_relaxed) >= kMaxMessages) return;
    int saved_errno = errno;
    char line[512];
    int prefix = snprintf(line, sizeof line, "growtrace: ");
    va_list args;
    va_start(args, fmt);
    // vsnprintf with these conversions does not allocate in glibc.
    int n = vsnprintf(line + prefix, sizeof line - prefix - 1, fmt, args);
    va_end(args);
    if (n < 0) n = 0;
    size_t len = static_cast<size_t>(prefix) + static_cast<size_t>(n);
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, len);
    (void)ignored;
    errno = saved_errno;
}

}  // namespace growtrace::preload
