// Diagnostics from inside the traced process: formatted on the stack and written with
// write(2), never allocating, at most kMaxMessages lines so a failing tracer cannot flood the
// program's stderr.
#pragma once

namespace growtrace::preload {

// printf-style; supports %s %d %u %ld %lu %zu %x %lx %p only.
void log_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace growtrace::preload
