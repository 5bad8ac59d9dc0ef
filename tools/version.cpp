#include "version.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "format/trace_format.h"
#include "paths.h"

namespace growtrace::cli {

std::vector<std::string> agent_python_versions(const std::string& agent_dir) {
    std::vector<int> minors;
    std::error_code ec;
    constexpr std::string_view kPrefix = "_growtrace_agent.cpython-3";
    for (std::filesystem::directory_iterator it(agent_dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::string name = it->path().filename().string();
        if (!name.starts_with(kPrefix) || !name.ends_with(".so")) continue;
        size_t digits = kPrefix.size(), n = 0;
        while (digits + n < name.size() && n < 3 && name[digits + n] >= '0' && name[digits + n] <= '9') ++n;
        if (n == 0 || digits + n >= name.size() || name[digits + n] != '-') continue;
        int minor = std::stoi(name.substr(digits, n));
        if (std::find(minors.begin(), minors.end(), minor) == minors.end()) minors.push_back(minor);
    }
    std::sort(minors.begin(), minors.end());
    std::vector<std::string> versions;
    for (int minor : minors) versions.push_back(fmt::format("3.{}", minor));
    return versions;
}

std::string version_text() {
    std::string library = preload_library_path();
    std::string agent_dir = python_agent_dir(library);
    std::vector<std::string> pythons = agent_dir.empty() ? std::vector<std::string>{} : agent_python_versions(agent_dir);
    std::string agents = pythons.empty()
                             ? std::string("none found (Python programs get native stacks only)")
                             : fmt::format("{} ({})", fmt::join(pythons, ", "), agent_dir);
    return fmt::format(
        "growtrace {}\n"
        "trace format: writes version {} (full traces) and {} (sampled), reads versions 1 to {}\n"
        "CPython agents: {}\n"
        "preload library: {}",
        GROWTRACE_VERSION, format::kFullVersion, format::kSampledVersion, format::kVersion, agents, library);
}

}  // namespace growtrace::cli
