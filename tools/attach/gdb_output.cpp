#include "attach/gdb_output.h"

#include <sstream>

namespace growtrace::cli {

std::optional<GdbReport::Wait> GdbReport::take_line(const std::string& line) {
    std::istringstream words(line);
    std::string tag, name;
    words >> tag;
    if (tag == "growtrace-waiting" || tag == "growtrace-gave-up") {
        Wait wait;
        words >> wait.thread >> wait.function;
        if (tag == "growtrace-gave-up") {
            gave_up_in = wait.function;
            return std::nullopt;
        }
        ++waits;
        return wait;
    }
    if (tag == "growtrace-calling") {
        words >> calling;
    } else if (tag == "growtrace-result") {
        long value = 0;
        words >> name >> value;
        results[name] = value;
    } else if (tag == "growtrace-text") {
        words >> name;
        std::getline(words.ignore(1), texts[name]);
    } else if (tag == "growtrace-failed") {
        words >> failed_call;
        std::getline(words >> std::ws, failure);
    }
    return std::nullopt;
}

std::string GdbReport::complaint() const {
    if (!failure.empty()) return failure;
    std::istringstream lines(output);
    std::string line, last;
    while (std::getline(lines, line)) {
        if (line.empty() || line[0] == '$' || line.starts_with("growtrace-") || line.find("[Inferior") == 0 ||
            line.find("[Thread") == 0 || line.find("[New ") == 0 || line.find("Using host libthread_db") == 0 ||
            line.find("0x") == 0)
            continue;
        last = line;
    }
    return last;
}

}  // namespace growtrace::cli
