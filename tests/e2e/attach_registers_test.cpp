// gdb's calls in an attached process put every register back: a program holding known values in
// its vector registers (and AMX tiles where it can) is attached and detached, and finds them
// unchanged. gdb 13 cannot write the registers where the CPU's XSAVE state is larger than it
// knows (AMX): `growtrace attach` preloads tools/attach/gdb_xstate_shim.c into it, without which
// these attaches fail there. And where gdb cannot write them, attach says so in one line and
// the process runs on as it was.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include "e2e_support.h"

namespace growtrace::e2e {
namespace {

using namespace std::chrono_literals;

// A program with its stdout and stderr going to files read while it runs.
class Program {
public:
    Program(const ScratchDir& dir, const std::string& name, const std::vector<std::string>& argv)
        : out_(dir / (name + ".out")) {
        std::string command = "exec";
        for (const std::string& a : argv) command += " '" + a + "'";
        command += " > '" + out_ + "' 2> '" + out_ + ".err'";
        spawned_ = std::make_unique<Spawned>(std::vector<std::string>{"/bin/sh", "-c", command},
                                             RunOptions{.timeout_seconds = 90});
    }
    ~Program() {
        if (running()) kill(pid(), SIGKILL);
        spawned_->wait();
    }
    pid_t pid() const { return spawned_->pid(); }
    bool running() const {
        if (pid() <= 0 || kill(pid(), 0) != 0) return false;
        std::string stat = read_file(fmt::format("/proc/{}/stat", pid()));
        size_t paren = stat.rfind(')');
        return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
    }
    std::vector<std::string> lines() const {
        std::ifstream in(out_);
        std::vector<std::string> result;
        for (std::string line; std::getline(in, line);) result.push_back(line);
        return result;
    }
    std::string err() const { return read_file(out_ + ".err"); }
    bool wait_for_lines(size_t count, std::chrono::seconds limit = 20s) const {
        return eventually([&] { return lines().size() >= count; }, limit);
    }
    // Waits for the program to end by itself.
    ProcessResult wait() { return spawned_->wait(); }
    std::string maps() const { return read_file(fmt::format("/proc/{}/maps", pid())); }

private:
    std::string out_;
    std::unique_ptr<Spawned> spawned_;
};

// xstate_keeper's output: "registers ..." then "tick N ok" with N from 0 without a gap.
void expect_registers_kept(const std::vector<std::string>& lines) {
    ASSERT_FALSE(lines.empty());
    EXPECT_TRUE(lines[0].starts_with("registers ")) << lines[0];
    static const std::regex tick(R"(tick (\d+) (.*))");
    for (size_t i = 1; i < lines.size(); ++i) {
        std::smatch m;
        ASSERT_TRUE(std::regex_match(lines[i], m, tick)) << lines[i];
        EXPECT_EQ(std::stoul(m[1]), i - 1) << lines[i];
        EXPECT_EQ(m[2], "ok") << "a register was changed by the attach: " << lines[i];
    }
}

// Attached twice, with tracing and detaching in between, the program finds each of its vector
// registers (zmm0-31 and k0-7 with AVX-512, else ymm0-15; the AMX tiles where it may use them)
// as it left it: gdb interrupted it inside its loop and put them back after each call.
TEST(AttachRegisters, VectorRegistersAreKeptAcrossAttachAndDetach) {
    ScratchDir dir;
    Program keeper(dir, "keeper", {GT_PROGRAM_XSTATE_KEEPER, "60"});
    ASSERT_TRUE(keeper.wait_for_lines(3)) << keeper.err();
    if (keeper.lines()[0].starts_with("registers none")) GTEST_SKIP() << keeper.lines()[0];
    const std::string pid = std::to_string(keeper.pid());
    for (const std::string name : {"first.gtrace", "second.gtrace"}) {
        ProcessResult r = growtrace({"attach", pid, "--full", "-o", dir / name, "--duration", "1"});
        ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
        EXPECT_NE(r.err.find("attached to process " + pid), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("detached from process " + pid), std::string::npos) << r.err;
        ASSERT_TRUE(keeper.running()) << keeper.err() << keeper.lines().back();
        ASSERT_TRUE(keeper.wait_for_lines(keeper.lines().size() + 2)) << keeper.err();
        EXPECT_TRUE(analyze_json(dir, dir / name).value("ended_cleanly", false)) << name;
    }
    kill(keeper.pid(), SIGTERM);
    keeper.wait();
    expect_registers_kept(keeper.lines());
    EXPECT_EQ(keeper.err(), "");
}

// growtrace as installed without its gdb library (a copy of the command alone): where gdb 13
// then cannot write the registers (this CPU's XSAVE state is larger than it knows), attach says
// so in one line before any call, and the programs run on untouched: nothing loaded, every
// register as it was, a sleep not cut short. Where gdb can, the attach simply works.
TEST(AttachRegisters, WhereGdbCannotWriteRegistersAttachSaysSoAndChangesNothing) {
    ScratchDir dir;
    fs::create_directories(dir.path() / "bin");
    const std::string lone = dir / "bin/growtrace";
    fs::copy_file(GT_GROWTRACE, lone);
    fs::permissions(lone, fs::perms::owner_all);
    RunOptions options{.env = {{"GROWTRACE_PRELOAD", GT_PRELOAD_LIBRARY}}, .timeout_seconds = 120};

    Program keeper(dir, "keeper", {GT_PROGRAM_XSTATE_KEEPER, "60"});
    Program sleeper(dir, "sleeper", {GT_PROGRAM_LONG_RUNNING, "60"});
    ASSERT_TRUE(keeper.wait_for_lines(3)) << keeper.err();
    ASSERT_TRUE(sleeper.wait_for_lines(3)) << sleeper.err();
    for (Program* program : {&keeper, &sleeper}) {
        const std::string pid = std::to_string(program->pid());
        ProcessResult r = run_process({lone, "attach", pid, "--full", "-o", dir / (pid + ".gtrace"), "--duration", "1"}, options);
        if (r.exit_code == 0) {
            std::cout << "gdb writes the registers here without the library: " << r.err;
        } else {
            EXPECT_EQ(r.exit_code, 2) << r.describe() << "\n" << r.err;
            EXPECT_EQ(r.out, "");
            EXPECT_TRUE(r.err.starts_with("growtrace: error: gdb cannot write the registers of process " + pid + " ("))
                << r.err;
            EXPECT_NE(r.err.find("nothing was called or loaded and the process runs on as it was"), std::string::npos)
                << r.err;
            EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
            EXPECT_EQ(program->maps().find("libgrowtrace"), std::string::npos) << "the tracer was loaded";
            EXPECT_FALSE(fs::exists(dir / (pid + ".gtrace")));
        }
        ASSERT_TRUE(program->running()) << program->err();
        ASSERT_TRUE(program->wait_for_lines(program->lines().size() + 3)) << program->err();
    }
    kill(keeper.pid(), SIGTERM);
    keeper.wait();
    expect_registers_kept(keeper.lines());
    EXPECT_EQ(keeper.err(), "");
    kill(sleeper.pid(), SIGTERM);
    sleeper.wait();
    EXPECT_EQ(sleeper.err(), "");
    static const std::regex tick(R"(tick (\d+) sessions \d+ check \d+)");
    std::vector<std::string> lines = sleeper.lines();
    for (size_t i = 0; i < lines.size(); ++i) {
        std::smatch m;
        ASSERT_TRUE(std::regex_match(lines[i], m, tick)) << lines[i];
        EXPECT_EQ(std::stoul(m[1]), i) << lines[i];
    }
}

}  // namespace
}  // namespace growtrace::e2e
