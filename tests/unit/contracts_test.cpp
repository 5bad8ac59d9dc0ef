// The contracts between growtrace's parts (contracts/): trace names, status codes, the
// environment, and the constants the Python side has to spell again.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "contracts/environment.h"
#include "contracts/status_codes.h"
#include "contracts/trace_names.h"
#include "contracts/growtrace_py_api.h"

namespace growtrace {
namespace {

namespace fs = std::filesystem;
using trace_names::Relation;

std::string read_file(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// --- trace names ---

TEST(TraceNames, StemDropsOnlyATrailingExtension) {
    EXPECT_EQ(trace_names::stem("/tmp/run.gtrace"), "/tmp/run");
    EXPECT_EQ(trace_names::stem("/tmp/run.gtrace.bak"), "/tmp/run.gtrace.bak");
    EXPECT_EQ(trace_names::stem("run"), "run");
}

TEST(TraceNames, DerivedNames) {
    EXPECT_EQ(trace_names::forked_child("/t/run.gtrace", 1234), "/t/run.1234.gtrace");
    EXPECT_EQ(trace_names::forked_child("/t/run.gtrace", 1234, 2), "/t/run.1234.2.gtrace");
    EXPECT_EQ(trace_names::forked_child("/t/run", 7), "/t/run.7.gtrace");
    char out[64];
    ASSERT_TRUE(trace_names::exec_image("/t/run.gtrace", 3, out, sizeof out));
    EXPECT_STREQ(out, "/t/run.exec3.gtrace");
    EXPECT_EQ(trace_names::unnamed(42), "growtrace.42.gtrace");
    EXPECT_EQ(trace_names::attached(42), "growtrace.42.attach.gtrace");
    EXPECT_EQ(trace_names::attached(42, 3), "growtrace.42.attach3.gtrace");
}

// One exec chain, one numbering: the image <stem>.exec<n> execs is <stem>.exec<n+1>; a forked
// child's chain starts at its own name.
TEST(TraceNames, TheNextImageOfAnExecChain) {
    EXPECT_EQ(trace_names::next_exec_image("/t/run.gtrace"), "/t/run.exec1.gtrace");
    EXPECT_EQ(trace_names::next_exec_image("/t/run.exec1.gtrace"), "/t/run.exec2.gtrace");
    EXPECT_EQ(trace_names::next_exec_image("/t/run.exec9.gtrace", 3), "/t/run.exec12.gtrace");
    EXPECT_EQ(trace_names::next_exec_image("/t/run.exec2.77.gtrace"), "/t/run.exec2.77.exec1.gtrace");
    EXPECT_EQ(trace_names::next_exec_image("/t/run.executor.gtrace"), "/t/run.executor.exec1.gtrace");
    EXPECT_EQ(trace_names::next_exec_image("/t/run.exec0.gtrace"), "/t/run.exec0.exec1.gtrace");
    EXPECT_EQ(trace_names::chain_position("/t/a.b.exec4.gtrace").chain, "/t/a.b");
    EXPECT_EQ(trace_names::chain_position("/t/a.b.exec4.gtrace").index, 4);
    EXPECT_EQ(trace_names::chain_position("exec3.gtrace").index, 0);
}

TEST(TraceNames, ANameThatDoesNotFitIsRefused) {
    char out[16];
    // Through a variable: the compiler would otherwise warn about the very truncation tested.
    volatile size_t size = sizeof out;
    EXPECT_FALSE(trace_names::forked_child("/a/long/path/run.gtrace", 1234, 1, out, size));
    EXPECT_FALSE(trace_names::exec_image("/a/long/path/run.gtrace", 1, out, size));
    EXPECT_TRUE(trace_names::forked_child("r", 1, 1, out, size));
}

TEST(TraceNames, RelationOfTheNamesTheTracerWrites) {
    const std::string main = "run.gtrace";
    EXPECT_EQ(trace_names::relation(trace_names::forked_child(main, 99), main), Relation::ForkedChild);
    EXPECT_EQ(trace_names::relation(trace_names::forked_child(main, 99, 2), main), Relation::ForkedChild);
    char exec[64];
    ASSERT_TRUE(trace_names::exec_image(main, 1, exec, sizeof exec));
    EXPECT_EQ(trace_names::relation(exec, main), Relation::ExecImage);
    // A child forked by the exec'd image: named after the image's trace.
    EXPECT_EQ(trace_names::relation(trace_names::forked_child(exec, 5), main), Relation::ForkedChild);
    EXPECT_EQ(trace_names::relation(main, main), Relation::None);
    EXPECT_EQ(trace_names::relation("other.1.gtrace", main), Relation::None);
    EXPECT_EQ(trace_names::relation("runner.1.gtrace", main), Relation::None);
    EXPECT_EQ(trace_names::relation("run..gtrace", main), Relation::None);
    EXPECT_EQ(trace_names::relation("run.1.html", main), Relation::None);
}

// --- status codes: public, scripts and CI compare them ---

TEST(StatusCodes, ExitCodesAreThoseDocumented) {
    EXPECT_EQ(kExitOk, 0);
    EXPECT_EQ(kExitError, 2);
    EXPECT_EQ(kExitGrowthFound, 3);
    EXPECT_EQ(kExitCommandFailed, 4);
    EXPECT_EQ(kExitSignalBase, 128);
}

TEST(StatusCodes, AttachStartFailuresAreDistinctAndNegative) {
    using namespace attach_status;
    const std::set<int> codes{kAlreadyTracing, kOtherAllocator, kStartFailed, kNoCallSites, kOwnHooksMissing};
    EXPECT_EQ(codes.size(), 5u);
    EXPECT_LT(*codes.rbegin(), 0);
    EXPECT_LT(kNotAttached, 0);
    EXPECT_EQ(python_version_code(3, 11), 311);
    EXPECT_EQ(python_major(python_version_code(3, 13)), 3);
    EXPECT_EQ(python_minor(python_version_code(3, 13)), 13);
    EXPECT_LT(kAgentNotCalled, 0);
    EXPECT_NE(kAgentNotCalled, kAgentFilesMissing);
    EXPECT_NE(kAgentNotCalled, kAgentAlreadyAttached);
}

// --- the environment ---

TEST(Environment, EveryVariableIsNamedOnceAndDescribed) {
    std::set<std::string> names;
    for (const environment::Variable& v : environment::kVariables) {
        EXPECT_TRUE(std::string(v.name).starts_with("GROWTRACE_")) << v.name;
        EXPECT_TRUE(names.insert(v.name).second) << v.name << " twice";
        EXPECT_NE(std::string(v.meaning), "") << v.name;
        EXPECT_NE(std::string(v.set_by), "") << v.name;
        EXPECT_NE(std::string(v.read_by), "") << v.name;
        EXPECT_EQ(environment::find(v.name), &v);
    }
    EXPECT_EQ(environment::find("GROWTRACE_NOT_A_VARIABLE"), nullptr);
    EXPECT_TRUE(environment::find(environment::kOutput)->set_by_run);
    EXPECT_FALSE(environment::find(environment::kTickMs)->set_by_run);
}

// The GROWTRACE_ variables a file names (a prefix alone, "GROWTRACE_", is not one).
std::set<std::string> named_variables(const std::string& text) {
    std::set<std::string> names;
    const std::regex variable("GROWTRACE_[A-Z0-9_]*[A-Z0-9]");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), variable); it != std::sregex_iterator(); ++it)
        names.insert(it->str());
    return names;
}

// The Python start-up code and the shell scripts cannot include contracts/environment.h: every
// variable they name must be in its table.
TEST(Environment, PythonAndShellFilesNameOnlyVariablesOfTheTable) {
    const fs::path root = GROWTRACE_SOURCE_DIR;
    std::vector<fs::path> files;
    for (const char* dir : {"pyagent/startup", "tools"})
        for (const auto& entry : fs::directory_iterator(root / dir))
            if (entry.path().extension() == ".py" || entry.path().extension() == ".sh") files.push_back(entry.path());
    ASSERT_FALSE(files.empty());
    std::set<std::string> seen;
    for (const fs::path& file : files)
        for (const std::string& name : named_variables(read_file(file))) {
            seen.insert(name);
            EXPECT_NE(environment::find(name), nullptr) << file << " names " << name
                                                        << ", which contracts/environment.h does not list";
        }
    // The agent's own variables are among them: the scan reads the right files.
    EXPECT_TRUE(seen.contains(environment::kPythonPathOrig));
    EXPECT_TRUE(seen.contains(environment::kPyagentExt));
}

TEST(Environment, NamedVariablesIgnoresAPrefixAlone) {
    EXPECT_EQ(named_variables("k.startswith(\"GROWTRACE_\") or GROWTRACE_OUTPUT"),
              std::set<std::string>{"GROWTRACE_OUTPUT"});
}

// The agent (pyagent/startup/growtrace-agent.py) spells the cache, feature and walk flags of
// contracts/growtrace_py_api.h again: every CACHE_*, FEATURE_* or WALK_* = N it defines
// must be the header's GROWTRACE_PY_NAME (its other constants are its own settings).
TEST(AgentFlags, ThePythonAgentUsesTheValuesOfTheCHeader) {
    const std::map<std::string, unsigned> header{
        {"CACHE_TYPED", GROWTRACE_PY_CACHE_TYPED},
        {"CACHE_PREEXISTING", GROWTRACE_PY_CACHE_PREEXISTING},
        {"CACHE_METHOD", GROWTRACE_PY_CACHE_METHOD},
        {"FEATURE_NATIVE_TYPE_HOOK", GROWTRACE_PY_FEATURE_NATIVE_TYPE_HOOK},
        {"FEATURE_CACHE_SIZE_POLL", GROWTRACE_PY_FEATURE_CACHE_SIZE_POLL},
        {"FEATURE_DICT_HOOK", GROWTRACE_PY_FEATURE_DICT_HOOK},
        {"WALK_HEAP_PASS", GROWTRACE_PY_WALK_HEAP_PASS},
        {"WALK_FINAL", GROWTRACE_PY_WALK_FINAL},
        {"WALK_TRACKED_ONLY", GROWTRACE_PY_WALK_TRACKED_ONLY}};
    const std::string agent = read_file(fs::path(GROWTRACE_SOURCE_DIR) / "pyagent/startup/growtrace-agent.py");
    const std::regex constant("^((?:CACHE|FEATURE|WALK)_[A-Z_]*) = ([0-9]+)$", std::regex::multiline);
    std::set<std::string> found;
    for (auto it = std::sregex_iterator(agent.begin(), agent.end(), constant); it != std::sregex_iterator(); ++it) {
        auto flag = header.find((*it)[1].str());
        ASSERT_NE(flag, header.end()) << (*it)[1] << " is not a flag of growtrace_py_api.h";
        EXPECT_EQ(std::stoul((*it)[2].str()), flag->second) << flag->first;
        found.insert(flag->first);
    }
    EXPECT_TRUE(found.contains("CACHE_TYPED") && found.contains("CACHE_PREEXISTING") && found.contains("WALK_FINAL"))
        << "the scan reads the agent";
}

}  // namespace
}  // namespace growtrace
