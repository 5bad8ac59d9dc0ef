// The one exception type the analyzer throws for bad input. The message always says what is
// wrong and where (byte offset in the file, block index, record kind) so a user can run
// `growtrace dump` on the same file and look at the spot.
#pragma once

#include <stdexcept>
#include <string>

namespace growtrace {

class TraceError : public std::runtime_error {
public:
    explicit TraceError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace growtrace
