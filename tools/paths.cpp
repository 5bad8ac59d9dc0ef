#include "paths.h"

#include "contracts/environment.h"

#include <cstdlib>
#include <filesystem>

namespace growtrace::cli {

namespace fs = std::filesystem;

std::string current_directory() {
    std::error_code ec;
    fs::path cwd = fs::current_path(ec);
    return ec ? std::string(".") : cwd.string();
}

std::string make_absolute(const std::string& path) {
    if (!path.empty() && path[0] == '/') return path;
    return current_directory() + "/" + path;
}

namespace {

// <dir of this executable>/../lib/NAME, or NAME if this executable cannot be found.
std::string beside_the_command(const char* name) {
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return name;
    return (self.parent_path().parent_path() / "lib" / name).string();
}

}  // namespace

std::string preload_library_path() {
    if (const char* env = getenv(environment::kPreload); env != nullptr && *env != '\0') return make_absolute(env);
    return beside_the_command("libgrowtrace.so");
}

std::string gdb_xstate_shim_path() { return beside_the_command("libgrowtrace-gdb-xstate.so"); }

std::string python_agent_dir(const std::string& library) {
    std::string dir;
    if (const char* env = getenv(environment::kPyagentDir); env != nullptr && *env != '\0') dir = make_absolute(env);
    else dir = (fs::path(library).parent_path().parent_path() / "share" / "growtrace" / "python").string();
    std::error_code ec;
    return fs::exists(fs::path(dir) / "startup" / "sitecustomize.py", ec) ? dir : std::string();
}

std::string python_agent_extension(const std::string& agent_dir) {
    return agent_dir + "/_growtrace_agent.cpython-311-x86_64-linux-gnu.so";
}

}  // namespace growtrace::cli
