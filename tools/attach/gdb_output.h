// What gdb printed while running tools/attach/gdb_script.py: the script's "growtrace-..." lines
// (one per step: waiting, calling, result, text, failed, gave-up) among gdb's own chatter.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace growtrace::cli {

struct GdbReport {
    std::string output;                        // everything gdb printed, stdout and stderr
    std::map<std::string, long> results;       // call name -> value
    std::map<std::string, std::string> texts;  // call name -> string, for "(char*)" calls
    std::string failed_call, failure;          // the call gdb refused or that failed, and why
    std::string calling;                       // the last call started
    int waits = 0;                             // times the program was let run out of its allocator
    std::string gave_up_in;                    // the function a thread stayed in past the wait

    // A thread the script lets run until it leaves `function`.
    struct Wait {
        std::string thread, function;
    };
    // Takes one line (without its newline) of gdb's output, which `output` already holds.
    // Returns the wait it announces, if it does.
    std::optional<Wait> take_line(const std::string& line);

    // gdb's diagnostics, for an error message: the failure of a call, else the last line of
    // the output that is neither the script's nor gdb's chatter.
    std::string complaint() const;
};

}  // namespace growtrace::cli
