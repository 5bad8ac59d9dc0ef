#include "sampling_option.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cctype>

#include "common.h"

namespace growtrace::cli {

std::optional<uint64_t> parse_byte_size(const std::string& text) {
    size_t i = 0;
    uint64_t value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        if (value > (UINT64_MAX - 9) / 10) return std::nullopt;
        value = value * 10 + static_cast<uint64_t>(text[i++] - '0');
    }
    if (i == 0) return std::nullopt;
    std::string unit = text.substr(i);
    for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    unsigned shift;
    if (unit.empty() || unit == "B") shift = 0;
    else if (unit == "K" || unit == "KB" || unit == "KIB") shift = 10;
    else if (unit == "M" || unit == "MB" || unit == "MIB") shift = 20;
    else if (unit == "G" || unit == "GB" || unit == "GIB") shift = 30;
    else return std::nullopt;
    // The tracer keeps sample distances below 2^62 bytes; nobody samples that thinly.
    if (value > (uint64_t{1} << (60 - shift))) return std::nullopt;
    return value << shift;
}

std::string format_byte_size(uint64_t bytes) {
    const char* units[] = {"", "K", "M", "G"};
    int u = 0;
    uint64_t v = bytes;
    while (u < 3 && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        ++u;
    }
    return fmt::format("{}{}", v, units[u]);
}

std::optional<uint64_t> SamplingOption::bytes(uint64_t fallback) const {
    if (full) return 0;
    if (sample.empty()) return fallback;
    auto parsed = parse_byte_size(sample);
    if (!parsed) {
        error(fmt::format("--sample {}: not a size in bytes (e.g. 512K, 1M, 65536; 0 traces every allocation)", sample));
        return std::nullopt;
    }
    return *parsed;
}

void add_sampling_options(CLI::App* app, SamplingOption& option, const std::string& default_text) {
    CLI::Option* sample =
        app->add_option("--sample", option.sample,
                        "Record a sample of the allocations: one every SIZE bytes on average (e.g. 512K, 1M; "
                        "each allocated byte equally likely to be picked), each weighted so that the figures are "
                        "unbiased estimates; the frees of sampled blocks are recorded exactly. Unsampled "
                        "allocations cost next to nothing and the trace stays small. 0 = trace every allocation. " +
                            default_text)
            ->type_name("SIZE");
    CLI::Option* full = app->add_flag("--full", option.full, "Trace every allocation (the same as --sample 0)");
    sample->excludes(full);
}

}  // namespace growtrace::cli
