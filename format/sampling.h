// The estimator of sampled traces (trace format v3, docs/trace-format.md "Sampling"), shared by
// the analyzer and the tests. The tracer's sample points form a Poisson process over the bytes
// each thread allocates, with `period` bytes between points on average; a block of `size`
// bytes is recorded when a point falls inside it.
#pragma once

#include <cmath>
#include <cstdint>

namespace growtrace::format {

// Probability that a block of `size` bytes is a sample: 1 - exp(-size/period). 1 when the
// trace is not sampled (period 0).
inline double sample_probability(uint64_t size, uint64_t period) {
    if (period == 0) return 1;
    return -std::expm1(-static_cast<double>(size) / static_cast<double>(period));
}

// What one recorded allocation stands for: `count` allocations of `bytes` bytes in all
// (Horvitz-Thompson: unbiased whatever the sizes), and the variance of `bytes` as an estimate,
// (1 - p) * bytes^2. A full trace's allocation stands for itself, with no variance; in a
// sampled trace a size-0 record is not a sample and stands for nothing.
struct SampleWeight {
    double count = 1;
    double bytes = 0;
    double variance = 0;
};

inline SampleWeight sample_weight(uint64_t size, uint64_t period) {
    SampleWeight w;
    if (period == 0) {
        w.bytes = static_cast<double>(size);
        return w;
    }
    if (size == 0) return {0, 0, 0};
    const double p = sample_probability(size, period);
    w.count = 1 / p;
    w.bytes = static_cast<double>(size) / p;
    w.variance = (1 - p) * w.bytes * w.bytes;
    return w;
}

}  // namespace growtrace::format
