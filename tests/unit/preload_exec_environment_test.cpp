// ExecEnvironment::with_agent: the environment an exec'd program gets from a traced Python.
// Checks when it is passed on unchanged, and otherwise that PYTHONPATH starts with the agent's
// start-up folder, the old value is kept in GROWTRACE_PYTHONPATH_ORIG, and every other entry
// stays, in order.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "preload/intercept/exec_environment.h"

namespace growtrace::preload {
namespace {

constexpr const char* kExt = "GROWTRACE_PYAGENT_EXT=/opt/growtrace/pyagent/_growtrace.so";
constexpr const char* kStartup = "/opt/growtrace/pyagent/startup";

// Holds the strings and the null-terminated pointer array of an environment.
class Env {
public:
    explicit Env(std::vector<std::string> entries) : strings_(std::move(entries)) {
        for (std::string& s : strings_) pointers_.push_back(s.data());
        pointers_.push_back(nullptr);
    }
    char* const* envp() { return pointers_.data(); }

private:
    std::vector<std::string> strings_;
    std::vector<char*> pointers_;
};

std::vector<std::string> to_vector(char* const* envp) {
    std::vector<std::string> out;
    for (char* const* e = envp; *e; ++e) out.emplace_back(*e);
    return out;
}

class ExecEnvironmentTest : public ::testing::Test {
protected:
    // About 50 KiB: kept off the stack.
    std::unique_ptr<ExecEnvironment> exec_env = std::make_unique<ExecEnvironment>();
};

TEST_F(ExecEnvironmentTest, WithoutAgentExtensionEnvironmentIsUnchanged) {
    Env env({"HOME=/home/u", "PYTHONPATH=/src", "PATH=/usr/bin"});
    EXPECT_EQ(exec_env->with_agent(env.envp()), env.envp());
}

TEST_F(ExecEnvironmentTest, WhenLauncherSettingsWereNotConsumedEnvironmentIsUnchanged) {
    // GROWTRACE_PYTHONPATH_ORIG still present, even empty: the exec'ing process is not the Python
    // that ran the agent's start-up, so the launcher's PYTHONPATH is still in place.
    Env with_value({"HOME=/home/u", kExt, "PYTHONPATH=/opt/growtrace/pyagent/startup:/src",
                    "GROWTRACE_PYTHONPATH_ORIG=/src"});
    EXPECT_EQ(exec_env->with_agent(with_value.envp()), with_value.envp());

    Env empty({kExt, "PYTHONPATH=/opt/growtrace/pyagent/startup", "GROWTRACE_PYTHONPATH_ORIG="});
    EXPECT_EQ(exec_env->with_agent(empty.envp()), empty.envp());
}

TEST_F(ExecEnvironmentTest, NullEnvironmentIsReturnedAsIs) {
    EXPECT_EQ(exec_env->with_agent(nullptr), nullptr);
}

TEST_F(ExecEnvironmentTest, ExtensionPathWithoutFolderLeavesEnvironmentUnchanged) {
    Env env({"GROWTRACE_PYAGENT_EXT=_growtrace.so", "PATH=/usr/bin"});
    EXPECT_EQ(exec_env->with_agent(env.envp()), env.envp());
}

TEST_F(ExecEnvironmentTest, UnsetPythonpathBecomesStartupFolderAndOriginalIsEmpty) {
    Env env({"HOME=/home/u", kExt, "PATH=/usr/bin"});
    char* const* result = exec_env->with_agent(env.envp());
    ASSERT_NE(result, env.envp());
    std::vector<std::string> expected = {"HOME=/home/u", kExt, "PATH=/usr/bin",
                                         std::string("PYTHONPATH=") + kStartup, "GROWTRACE_PYTHONPATH_ORIG="};
    EXPECT_EQ(to_vector(result), expected);
}

TEST_F(ExecEnvironmentTest, EmptyPythonpathBecomesStartupFolderWithoutTrailingColon) {
    Env env({"HOME=/home/u", "PYTHONPATH=", kExt, "PATH=/usr/bin"});
    char* const* result = exec_env->with_agent(env.envp());
    ASSERT_NE(result, env.envp());
    std::vector<std::string> expected = {"HOME=/home/u", kExt, "PATH=/usr/bin",
                                         std::string("PYTHONPATH=") + kStartup, "GROWTRACE_PYTHONPATH_ORIG="};
    EXPECT_EQ(to_vector(result), expected);
}

TEST_F(ExecEnvironmentTest, SetPythonpathIsPrefixedWithStartupFolderAndKeptAsOriginal) {
    Env env({"A=1", "PYTHONPATH=/src:/lib/py", "B=2", kExt, "C=3"});
    char* const* result = exec_env->with_agent(env.envp());
    ASSERT_NE(result, env.envp());
    std::vector<std::string> expected = {"A=1", "B=2", kExt, "C=3",
                                         std::string("PYTHONPATH=") + kStartup + ":/src:/lib/py",
                                         "GROWTRACE_PYTHONPATH_ORIG=/src:/lib/py"};
    EXPECT_EQ(to_vector(result), expected);
}

TEST_F(ExecEnvironmentTest, VariablesWhoseNamesOnlyStartWithPythonpathAreKeptAndIgnored) {
    Env env({"PYTHONPATH_EXTRA=/x", kExt, "PYTHONPATHS=/y"});
    char* const* result = exec_env->with_agent(env.envp());
    ASSERT_NE(result, env.envp());
    // Neither counts as PYTHONPATH: the new one is just the start-up folder, the original empty.
    std::vector<std::string> expected = {"PYTHONPATH_EXTRA=/x", kExt, "PYTHONPATHS=/y",
                                         std::string("PYTHONPATH=") + kStartup, "GROWTRACE_PYTHONPATH_ORIG="};
    EXPECT_EQ(to_vector(result), expected);
}

TEST_F(ExecEnvironmentTest, ResultDoesNotChangeTheCallersEnvironment) {
    Env env({"PYTHONPATH=/src", kExt});
    std::vector<std::string> before = to_vector(env.envp());
    exec_env->with_agent(env.envp());
    EXPECT_EQ(to_vector(env.envp()), before);
}

TEST_F(ExecEnvironmentTest, PythonpathTooLongForItsBufferLeavesEnvironmentUnchanged) {
    Env env({kExt, "PYTHONPATH=" + std::string(9000, 'p')});
    EXPECT_EQ(exec_env->with_agent(env.envp()), env.envp());
}

// with_tracer: an image exec'd by an attached process gets what `growtrace run` sets.
const TracedImageSettings kAttached{"/opt/growtrace/lib/libgrowtrace.so", "/tmp/t.gtrace", 524288, ""};

TEST_F(ExecEnvironmentTest, AttachedProcessImageGetsRunSettingsInPlaceOfItsOwn) {
    Env env({"HOME=/home/u", "GROWTRACE_OUTPUT=/elsewhere.gtrace", "PATH=/usr/bin", "GROWTRACE_SAMPLE=1",
             "GROWTRACE_FOLLOW_FORK=0", "GROWTRACE_OUTPUTS=kept"});
    char* const* result = exec_env->with_tracer(env.envp(), kAttached);
    ASSERT_NE(result, env.envp());
    std::vector<std::string> expected = {"HOME=/home/u", "PATH=/usr/bin", "GROWTRACE_OUTPUTS=kept",
                                         "LD_PRELOAD=/opt/growtrace/lib/libgrowtrace.so",
                                         "GROWTRACE_OUTPUT=/tmp/t.gtrace", "GROWTRACE_SAMPLE=524288"};
    EXPECT_EQ(to_vector(result), expected);
}

TEST_F(ExecEnvironmentTest, AttachedProcessPreloadsKeepFollowingTheLibrary) {
    Env env({"LD_PRELOAD=/usr/lib/libjemalloc.so", "A=1"});
    std::vector<std::string> expected = {"A=1", "LD_PRELOAD=/opt/growtrace/lib/libgrowtrace.so:/usr/lib/libjemalloc.so",
                                         "GROWTRACE_OUTPUT=/tmp/t.gtrace", "GROWTRACE_SAMPLE=524288"};
    EXPECT_EQ(to_vector(exec_env->with_tracer(env.envp(), kAttached)), expected);
}

TEST_F(ExecEnvironmentTest, AttachedPythonImageAlsoGetsTheAgent) {
    Env env({"PYTHONPATH=/src", "A=1"});
    TracedImageSettings settings = kAttached;
    settings.agent_extension = "/opt/growtrace/pyagent/_growtrace.so";
    std::vector<std::string> expected = {"A=1",
                                         "LD_PRELOAD=/opt/growtrace/lib/libgrowtrace.so",
                                         "GROWTRACE_OUTPUT=/tmp/t.gtrace",
                                         "GROWTRACE_SAMPLE=524288",
                                         kExt,
                                         std::string("PYTHONPATH=") + kStartup + ":/src",
                                         "GROWTRACE_PYTHONPATH_ORIG=/src"};
    EXPECT_EQ(to_vector(exec_env->with_tracer(env.envp(), settings)), expected);
}

TEST_F(ExecEnvironmentTest, AttachedProcessOutputTooLongLeavesEnvironmentUnchanged) {
    Env env({"A=1"});
    std::string output(5000, 'o');
    TracedImageSettings settings = kAttached;
    settings.output = output.c_str();
    EXPECT_EQ(exec_env->with_tracer(env.envp(), settings), env.envp());
}

// with_image: under `growtrace run`, the image gets the trace name its exec'ing image chose and
// the launchers before it, in place of inherited ones; the agent's entries as with_agent.
TEST_F(ExecEnvironmentTest, ExecdImageGetsItsTraceNameAndLaunchers) {
    Env env({"HOME=/home/u", "GROWTRACE_OUTPUT=/tmp/t.gtrace", "GROWTRACE_LAUNCHERS=old", "A=1"});
    std::vector<std::string> expected = {"HOME=/home/u", "A=1", "GROWTRACE_OUTPUT=/tmp/t.exec1.gtrace",
                                         "GROWTRACE_LAUNCHERS=sh\x1f-c\x1f" "exec x"};
    EXPECT_EQ(to_vector(exec_env->with_image(env.envp(), "/tmp/t.exec1.gtrace", "sh\x1f-c\x1f" "exec x")), expected);
}

TEST_F(ExecEnvironmentTest, SpawnedImageGetsNoLaunchers) {
    Env env({"GROWTRACE_OUTPUT=/tmp/t.gtrace", "GROWTRACE_LAUNCHERS=old", "A=1"});
    std::vector<std::string> expected = {"A=1", "GROWTRACE_OUTPUT=/tmp/t.55.exec1.gtrace"};
    EXPECT_EQ(to_vector(exec_env->with_image(env.envp(), "/tmp/t.55.exec1.gtrace", "")), expected);
}

TEST_F(ExecEnvironmentTest, WithoutAnImageNameOnlyTheAgentIsHandled) {
    Env env({"GROWTRACE_OUTPUT=/tmp/t.gtrace", "A=1"});
    EXPECT_EQ(exec_env->with_image(env.envp(), "", "x"), env.envp());
}

TEST_F(ExecEnvironmentTest, AttachedProcessImageGetsTheLaunchers) {
    Env env({"A=1", "GROWTRACE_LAUNCHERS=stale"});
    TracedImageSettings settings = kAttached;
    settings.launchers = "prog";
    std::vector<std::string> expected = {"A=1", "LD_PRELOAD=/opt/growtrace/lib/libgrowtrace.so",
                                         "GROWTRACE_OUTPUT=/tmp/t.gtrace", "GROWTRACE_SAMPLE=524288",
                                         "GROWTRACE_LAUNCHERS=prog"};
    EXPECT_EQ(to_vector(exec_env->with_tracer(env.envp(), settings)), expected);
}

}  // namespace
}  // namespace growtrace::preload
