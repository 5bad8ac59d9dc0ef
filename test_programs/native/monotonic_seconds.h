// Seconds on the monotonic clock, for the test programs that pace or time their work.
#pragma once

#include <time.h>

inline double monotonic_seconds() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
