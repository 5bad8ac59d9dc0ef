// `--sample SIZE` / `--full`, shared by run, check and attach: how allocations are recorded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace growtrace::cli {

// What attach uses unless told otherwise: services run for hours (docs/sampling.md).
inline constexpr uint64_t kDefaultAttachSampleBytes = 512 * 1024;

struct SamplingOption {
    std::string sample;  // as given: "512K", "1M", "65536", "0"
    bool full = false;

    // Mean bytes between samples, 0 for full tracing, `fallback` when neither option was
    // given; nothing (after printing an error) if SIZE is not a size.
    std::optional<uint64_t> bytes(uint64_t fallback) const;
};

// Adds both options; `default_text` says what happens without them, for --help.
void add_sampling_options(CLI::App* app, SamplingOption& option, const std::string& default_text);

// "524288", "512K", "512KiB", "4M", "1G" (powers of 1024). Nothing if it is not one.
std::optional<uint64_t> parse_byte_size(const std::string& text);

// "512K" for 524288, "1.5M", "100 B": the size as --sample takes it.
std::string format_byte_size(uint64_t bytes);

}  // namespace growtrace::cli
