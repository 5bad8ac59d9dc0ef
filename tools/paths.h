// Paths the verbs share: making user paths absolute (a traced or attached process may run in
// another directory), and finding the preload library.
#pragma once

#include <string>

namespace growtrace::cli {

std::string current_directory();
std::string make_absolute(const std::string& path);
// $GROWTRACE_PRELOAD, else <dir of this executable>/../lib/libgrowtrace.so.
std::string preload_library_path();

}  // namespace growtrace::cli
