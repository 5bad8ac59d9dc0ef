// A single-threaded program that reads lines from stdin as fast as they come (like a shell fed
// statements through a pipe) and spends the rest of its time in malloc and free: a copy of
// each line replaces one of 4096 kept copies. For `growtrace attach`: gdb finds its only
// thread inside read() under stdio, or inside the allocator, nearly every time it looks.
// Prints "tick N lines M" every 100 ms and "done lines M" at the end of its input.
//
// usage: input_reader

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "monotonic_seconds.h"

namespace {

constexpr int kSlots = 4096;
char* g_slots[kSlots];

__attribute__((noinline)) void keep_copy(const char* line, unsigned long n) {
    char*& slot = g_slots[n % kSlots];
    free(slot);
    slot = strdup(line);
}

}  // namespace

int main() {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    char* line = nullptr;
    size_t capacity = 0;
    unsigned long lines = 0, tick = 0;
    double next_tick = monotonic_seconds();
    while (getline(&line, &capacity, stdin) > 0) {
        keep_copy(line, lines++);
        if (monotonic_seconds() >= next_tick) {
            printf("tick %lu lines %lu\n", tick++, lines);
            next_tick += 0.1;
        }
    }
    printf("done lines %lu\n", lines);
    for (char*& slot : g_slots) free(slot);
    free(line);
    return 0;
}
