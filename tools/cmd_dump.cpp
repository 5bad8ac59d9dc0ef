// growtrace dump TRACE: every record of a trace, readably, with its position in the file.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "tools/analyze_command.h"
#include "common.h"

namespace growtrace::cli {

Verb add_dump_verb(CLI::App& parent) {
    auto trace = std::make_shared<std::string>();
    CLI::App* sub = parent.add_subcommand("dump", "Print every record of a trace file readably.");
    sub->add_option("TRACE", *trace, "Trace file written by growtrace run")->required();
    return {sub, [trace] { return dump_command(*trace, std::cout, std::cerr); }};
}

}  // namespace growtrace::cli
