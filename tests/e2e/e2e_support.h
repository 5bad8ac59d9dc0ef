// Shared helpers of the end-to-end tests: running processes with captured output, scratch
// directories, source markers, and `growtrace analyze --json` results.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace growtrace::e2e {

namespace fs = std::filesystem;

struct ProcessResult {
    int exit_code = -1;    // valid unless signaled
    int signal = 0;        // terminating signal, 0 if it exited
    bool timed_out = false;
    std::string out;
    std::string err;

    // "exit 3", "signal 9", for failure messages.
    std::string describe() const;
};

struct RunOptions {
    std::string cwd;                                       // empty: inherit
    std::string stdin_data;                                // fed through a file
    std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing in) ours
    int timeout_seconds = 120;
};

// A started process whose stdout and stderr go to files until wait() collects them.
class Spawned {
public:
    Spawned(const std::vector<std::string>& argv, const RunOptions& options);
    ~Spawned();
    Spawned(const Spawned&) = delete;
    Spawned& operator=(const Spawned&) = delete;
    pid_t pid() const { return pid_; }
    // Waits (killing the process group after the timeout) and returns what it printed.
    ProcessResult wait();

private:
    pid_t pid_ = -1;
    int timeout_seconds_;
    std::string io_dir_;
    std::string start_error_;
};

// Runs argv[0] (a path) with argv, capturing stdout and stderr; kills it after the timeout.
ProcessResult run_process(const std::vector<std::string>& argv, const RunOptions& options = {});

// `growtrace ARGS...`
ProcessResult growtrace(const std::vector<std::string>& args, const RunOptions& options = {});

// A fresh directory under $TMPDIR (or /tmp), removed by the destructor unless the current
// test failed (then its path is printed so the traces can be looked at).
class ScratchDir {
public:
    ScratchDir();
    ~ScratchDir();
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    const fs::path& path() const { return path_; }
    std::string operator/(const std::string& name) const { return (path_ / name).string(); }
    // Names of the files in the directory, sorted.
    std::vector<std::string> files() const;

private:
    fs::path path_;
};

// 1-based line of the line containing "LINE-MARK: <tag>" in test_programs/native/<file>.
int marker_line(const std::string& file, const std::string& tag);

// The CPython programs (test_programs/python/) and the interpreters they run on: the venv's
// shared-library Python 3.11 (tools/setup_python.sh) and Debian's python3.11, which has
// libpython linked into its executable; and, for the tests of every version, all of these.
inline const std::string kPythonPrograms = std::string(GT_SOURCE_DIR) + "/test_programs/python/";
inline const std::string kVenvPython = std::string(GT_SOURCE_DIR) + "/.venv/bin/python";
inline const std::string kStaticPython = "/usr/bin/python3.11";

struct PythonUnderTest {
    std::string name;    // "3.12", "3.11-static"
    std::string python;  // the interpreter
    bool packages;       // a venv with tools/python_requirements.txt (openai, pydantic)
};
// Every CPython version growtrace reads: the project's venvs for 3.10 to 3.13 and Debian's
// static 3.11. Some may be absent on a machine: tests then skip them, saying why.
const std::vector<PythonUnderTest>& pythons_under_test();
inline void PrintTo(const PythonUnderTest& p, std::ostream* os) { *os << p.name << " (" << p.python << ")"; }
// A test name for gtest ("Py3_12", "Py3_11_static").
std::string python_test_name(const ::testing::TestParamInfo<PythonUnderTest>& info);
// Skips the calling test when `p` is not installed, or needs packages it does not have.
#define GT_SKIP_UNLESS_INSTALLED(p, need_packages)                                                            \
    do {                                                                                                       \
        if (access((p).python.c_str(), X_OK) != 0)                                                             \
            GTEST_SKIP() << "CPython " << (p).name << ": " << (p).python                                     \
                         << " is not installed (tools/setup_python.sh makes the venvs)";                      \
        if ((need_packages) && !(p).packages)                                                                  \
            GTEST_SKIP() << "CPython " << (p).name << " has no venv with the openai reproduction's packages"; \
    } while (0)
// 1-based line of "# mark: NAME" in test_programs/python/<file>.
int python_mark(const std::string& file, const std::string& name);
// The findings of one kind in an analyzer report.
std::vector<nlohmann::json> findings_of_kind(const nlohmann::json& report, const std::string& kind);
// A frame list (JSON) holds `function` in a file ending with `file_suffix` (at `line` if >= 0).
bool has_frame(const nlohmann::json& frames, const std::string& function, const std::string& file_suffix,
               int line = -1);

// The lines of gc_callbacks_seen.py, without their "tick N ".
std::vector<std::string> gc_callbacks_seen(const std::string& out);
// Full collections the agent reported in a trace (`growtrace dump` text), not counting the one
// at the shutdown mark.
size_t reported_full_collections(const std::string& dump);

std::string read_file(const std::string& path);
// Polls `condition` until it holds (true) or `limit` passes (false): a test waits on what it
// needs to have happened, never for a fixed time.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = std::chrono::seconds(10));
void write_file(const std::string& path, const std::string& contents);

// Traces `program_args` with `growtrace run [RUN_OPTIONS] -o TRACE -- ...` in `dir`, asserting
// (via gtest) that the command exits with `expected_status` and that a trace was written.
// Returns the run's result.
ProcessResult trace_program(const ScratchDir& dir, const std::string& trace,
                            const std::vector<std::string>& program_args, int expected_status = 0,
                            const std::vector<std::string>& run_options = {});

// The two ways of tracing that the classification tests run in: every allocation
// (`growtrace run`'s default), and sampled with `--sample 512K`, the default of `attach`.
enum class TraceMode { Full, Sampled };
// growtrace run options of a mode.
std::vector<std::string> mode_options(TraceMode mode);
std::string mode_name(TraceMode mode);
inline void PrintTo(TraceMode mode, std::ostream* os) { *os << mode_name(mode); }
inline constexpr double kSampleBytes = 512 * 1024;

// `growtrace analyze TRACE --json -o OUT --no-follow-exec` then parses OUT: the report of the
// trace's own image. Asserts the analysis succeeded.
nlohmann::json analyze_json(const ScratchDir& dir, const std::string& trace);
// The same without --no-follow-exec: the report of the program at the end of the trace's exec
// chain (exec_chain_test.cpp).
nlohmann::json analyze_program_json(const ScratchDir& dir, const std::string& trace);
nlohmann::json analyze_json(const ScratchDir& dir, const std::string& trace, const std::vector<std::string>& options);

}  // namespace growtrace::e2e
