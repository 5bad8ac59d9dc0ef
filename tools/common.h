// What every verb shares: the exit codes (contracts/status_codes.h) and one-line diagnostics
// on stderr.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "contracts/status_codes.h"

namespace CLI {
class App;
}

namespace growtrace::cli {

// "growtrace: error: MESSAGE" on stderr; returns kExitError so callers can `return error(...)`.
int error(std::string_view message);
// "growtrace: warning: MESSAGE" on stderr.
void warning(std::string_view message);
// "growtrace: MESSAGE" on stderr.
void note(std::string_view message);

// A verb: its CLI11 subcommand and what runs once the command line parsed.
struct Verb {
    CLI::App* app;
    std::function<int()> run;
};

// The words after the first "--" on the command line. main splits them off before CLI11
// sees them, so a traced command's own options are never taken for ours.
struct Trailing {
    bool present = false;
    std::vector<std::string> words;
};

Verb add_run_verb(CLI::App& parent, const Trailing& trailing);
Verb add_analyze_verb(CLI::App& parent);
Verb add_dump_verb(CLI::App& parent);
Verb add_attach_verb(CLI::App& parent);
Verb add_detach_verb(CLI::App& parent);
Verb add_report_verb(CLI::App& parent);
Verb add_check_verb(CLI::App& parent, const Trailing& trailing);
Verb add_diff_verb(CLI::App& parent);
Verb add_export_verb(CLI::App& parent);

// The traces a verb takes (TRACE..., at least one) and --with-children; `merged` says what
// becomes of several traces. Defined in cmd_analyze.cpp.
void add_trace_set_arguments(CLI::App* sub, std::vector<std::string>& traces, bool& with_children,
                             const std::string& merged);

}  // namespace growtrace::cli
