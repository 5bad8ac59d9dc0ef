#include "attach/target_process.h"

#include <fmt/core.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace growtrace::cli {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string status_field(int pid, const std::string& name) {
    std::ifstream in(fmt::format("/proc/{}/status", pid));
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, name.size() + 1, name + ":") == 0) {
            size_t start = line.find_first_not_of(" \t", name.size() + 1);
            return start == std::string::npos ? "" : line.substr(start);
        }
    }
    return "";
}

bool process_exists(int pid) {
    if (!(kill(pid, 0) == 0 || errno == EPERM)) return false;
    return status_field(pid, "State").compare(0, 1, "Z") != 0;
}

std::string process_name(int pid) {
    std::string comm = read_text(fmt::format("/proc/{}/comm", pid));
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    return comm;
}

bool tracer_writing(int pid) {
    std::error_code ec;
    for (fs::directory_iterator it(fmt::format("/proc/{}/task", pid), ec), end; !ec && it != end; it.increment(ec))
        if (read_text((it->path() / "comm").string()) == "growtrace-wr\n") return true;
    return false;
}

}  // namespace growtrace::cli
