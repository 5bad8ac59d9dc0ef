// A read-only view of `growtrace analyze --json` for the tests: stacks with their frames,
// figures and classification, and look-ups by the frame a test program allocates in.
// All knowledge of the JSON layout is here, so a change of the report touches one file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace growtrace::e2e {

struct FrameView {
    std::string function;  // demangled, as reported
    std::string file;      // basename
    int line = 0;
    std::string module;    // basename
};

struct StackView {
    std::vector<FrameView> frames;  // innermost first
    std::string classification;     // "unbounded", "bounded", "transient", ...
    bool flagged = false;           // reported as a finding
    uint64_t live_bytes = 0;        // still allocated at the end of the trace
    uint64_t live_count = 0;
    uint64_t allocations = 0;       // allocations made over the whole trace
    std::string module_basename;    // module of the frame a look-up matched
    // Sampled traces: the figures above are estimates; the standard error of live_bytes and the
    // samples behind it (0 and allocations in a full trace).
    double live_bytes_stderr = 0;
    uint64_t live_samples = 0;
};

class Report {
public:
    explicit Report(const nlohmann::json& report);

    // Sum over every stack having a frame in `function` (matched as an unqualified name) whose
    // file basename is `file` and, if line >= 0, whose line is `line`. Nothing if none has.
    std::optional<StackView> stack_at(const std::string& function, const std::string& file, int line) const;
    // Same, for any file and line.
    std::optional<StackView> stack_in(const std::string& function) const;

    bool is_flagged(const std::string& function) const;
    uint64_t live_bytes_in(const std::string& function) const;
    uint64_t allocations_in(const std::string& function) const;
    bool findings_empty() const;
    // A figure of the report's "totals" object ("retained_bytes", "frees", ...), 0 if absent.
    uint64_t total(const std::string& key) const;
    // Does some finding have a frame in `function` within module `module_basename`?
    bool finding_names(const std::string& function, const std::string& module_basename) const;

    // The stacks, one line each, for failure messages.
    std::string summary() const;

private:
    std::vector<StackView> stacks_;
    std::vector<StackView> findings_;
    std::string parse_error_;
    nlohmann::json totals_;
};

// Does a reported function name ("ns::(anonymous namespace)::f(unsigned long)") name `f`?
bool function_is(const std::string& reported, const std::string& name);

}  // namespace growtrace::e2e
