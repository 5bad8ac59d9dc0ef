#include "e2e_support.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/core.h>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace growtrace::e2e {

std::string ProcessResult::describe() const {
    if (timed_out) return "timed out";
    if (signal != 0) return fmt::format("signal {}", signal);
    return fmt::format("exit {}", exit_code);
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        if (condition()) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::vector<std::string> gc_callbacks_seen(const std::string& out) {
    std::vector<std::string> seen;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        size_t at = line.find(' ', line.find(' ') + 1);
        seen.push_back(at == std::string::npos ? line : line.substr(at + 1));
    }
    return seen;
}

size_t reported_full_collections(const std::string& dump) {
    size_t n = 0;
    std::istringstream in(dump);
    for (std::string line; std::getline(in, line);)
        if (line.find("Collection tid=") != std::string::npos && line.find(" start generation=2") != std::string::npos &&
            line.find("at_shutdown") == std::string::npos)
            ++n;
    return n;
}

void write_file(const std::string& path, const std::string& contents) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << contents;
}

Spawned::Spawned(const std::vector<std::string>& argv, const RunOptions& options)
    : timeout_seconds_(options.timeout_seconds) {
    char pattern[] = "/tmp/gt-e2e-io-XXXXXX";
    const char* io_dir = mkdtemp(pattern);
    if (io_dir == nullptr) {
        start_error_ = "mkdtemp failed";
        return;
    }
    io_dir_ = io_dir;
    std::string in_path = io_dir_ + "/stdin";
    std::string out_path = io_dir_ + "/stdout";
    std::string err_path = io_dir_ + "/stderr";
    write_file(in_path, options.stdin_data);

    // Everything the child needs is prepared before fork.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
        std::string entry = *e;
        bool replaced = std::any_of(options.env.begin(), options.env.end(), [&](const auto& kv) {
            return entry.starts_with(kv.first + "=");
        });
        if (!replaced) env_strings.push_back(entry);
    }
    for (const auto& [name, value] : options.env) env_strings.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);

    pid_ = fork();
    if (pid_ == 0) {
        if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) _exit(121);
        int in = open(in_path.c_str(), O_RDONLY);
        int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0) _exit(122);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        // Its own process group, so a timeout kill reaches the whole tree.
        setpgid(0, 0);
        execve(args[0], args.data(), envp.data());
        _exit(123);
    }
    if (pid_ < 0) start_error_ = "fork failed";
}

Spawned::~Spawned() {
    if (pid_ > 0) wait();
    if (!io_dir_.empty()) {
        std::error_code ec;
        fs::remove_all(io_dir_, ec);
    }
}

ProcessResult Spawned::wait() {
    ProcessResult result;
    if (pid_ <= 0) {
        result.err = start_error_.empty() ? "already waited for" : start_error_;
        return result;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds_);
    int status = 0;
    for (;;) {
        pid_t done = waitpid(pid_, &status, WNOHANG);
        if (done == pid_) break;
        if (std::chrono::steady_clock::now() > deadline) {
            result.timed_out = true;
            kill(-pid_, SIGKILL);
            kill(pid_, SIGKILL);
            waitpid(pid_, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    if (WIFSIGNALED(status)) {
        result.signal = WTERMSIG(status);
    } else {
        result.exit_code = WEXITSTATUS(status);
    }
    result.out = read_file(io_dir_ + "/stdout");
    result.err = read_file(io_dir_ + "/stderr");
    return result;
}

ProcessResult run_process(const std::vector<std::string>& argv, const RunOptions& options) {
    Spawned process(argv, options);
    return process.wait();
}

ProcessResult growtrace(const std::vector<std::string>& args, const RunOptions& options) {
    std::vector<std::string> argv{GT_GROWTRACE};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, options);
}

ScratchDir::ScratchDir() {
    const char* tmp = getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/gt-e2e-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    const char* made = mkdtemp(buffer.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = made;
}

ScratchDir::~ScratchDir() {
    if (::testing::Test::HasFailure()) {
        fmt::print(stderr, "e2e: keeping {} for inspection\n", path_.string());
        return;
    }
    std::error_code ec;
    fs::remove_all(path_, ec);
}

std::vector<std::string> ScratchDir::files() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

int marker_line(const std::string& file, const std::string& tag) {
    std::ifstream in(std::string(GT_NATIVE_SOURCE_DIR) + "/" + file);
    std::string line;
    std::string marker = "LINE-MARK: " + tag;
    for (int number = 1; std::getline(in, line); ++number) {
        if (line.find(marker) != std::string::npos) return number;
    }
    ADD_FAILURE() << "no '" << marker << "' in " << file;
    return -1;
}

// 1-based line of "# mark: NAME" in a Python test program.
int python_mark(const std::string& file, const std::string& name) {
    std::ifstream in(kPythonPrograms + file);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
        if (line.find("# mark: " + name) != std::string::npos) return n;
    ADD_FAILURE() << "no '# mark: " << name << "' in " << file;
    return -1;
}

std::vector<nlohmann::json> findings_of_kind(const nlohmann::json& report, const std::string& kind) {
    std::vector<nlohmann::json> out;
    for (const nlohmann::json& f : report["findings"])
        if (f["kind"] == kind) out.push_back(f);
    return out;
}

bool has_frame(const nlohmann::json& frames, const std::string& function, const std::string& file_suffix, int line) {
    for (const nlohmann::json& f : frames) {
        std::string file = f["file"];
        if (f["function"] == function && file.ends_with(file_suffix) && (line < 0 || f["line"] == line)) return true;
    }
    return false;
}

std::vector<std::string> mode_options(TraceMode mode) {
    if (mode == TraceMode::Sampled) return {"--sample", "512K"};
    return {};
}

std::string mode_name(TraceMode mode) { return mode == TraceMode::Sampled ? "Sampled" : "Full"; }

ProcessResult trace_program(const ScratchDir& dir, const std::string& trace,
                            const std::vector<std::string>& program_args, int expected_status,
                            const std::vector<std::string>& run_options) {
    std::vector<std::string> args{"run"};
    args.insert(args.end(), run_options.begin(), run_options.end());
    args.insert(args.end(), {"-o", trace, "--"});
    args.insert(args.end(), program_args.begin(), program_args.end());
    ProcessResult r = growtrace(args, {.cwd = dir.path().string()});
    EXPECT_EQ(r.signal, 0) << r.err;
    EXPECT_EQ(r.exit_code, expected_status) << r.err;
    EXPECT_NE(r.err.find("growtrace: trace written to " + trace), std::string::npos) << r.err;
    EXPECT_GT(fs::exists(trace) ? fs::file_size(trace) : 0, 16u) << trace;
    return r;
}

nlohmann::json analyze_json(const ScratchDir& dir, const std::string& trace) {
    return analyze_json(dir, trace, {"--no-follow-exec"});
}

nlohmann::json analyze_program_json(const ScratchDir& dir, const std::string& trace) { return analyze_json(dir, trace, {}); }

nlohmann::json analyze_json(const ScratchDir& dir, const std::string& trace, const std::vector<std::string>& options) {
    std::string report = trace + ".json";
    std::vector<std::string> args{"analyze", trace, "--json", "-o", report};
    args.insert(args.end(), options.begin(), options.end());
    ProcessResult r = growtrace(args, {.cwd = dir.path().string()});
    EXPECT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    std::string text = read_file(report);
    auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(parsed.is_discarded()) << "analyze --json wrote no valid JSON:\n" << text.substr(0, 2000);
    return parsed;
}

const std::vector<PythonUnderTest>& pythons_under_test() {
    static const std::vector<PythonUnderTest> pythons = {
        {"3.10", std::string(GT_SOURCE_DIR) + "/.venv-3.10/bin/python", true},
        {"3.11", kVenvPython, true},
        {"3.11-static", kStaticPython, false},
        {"3.12", std::string(GT_SOURCE_DIR) + "/.venv-3.12/bin/python", true},
        {"3.13", std::string(GT_SOURCE_DIR) + "/.venv-3.13/bin/python", true},
    };
    return pythons;
}

std::string python_test_name(const ::testing::TestParamInfo<PythonUnderTest>& info) {
    std::string name = "Py" + info.param.name;
    for (char& c : name)
        if (c == '.' || c == '-') c = '_';
    return name;
}

}  // namespace growtrace::e2e
