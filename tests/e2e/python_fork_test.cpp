// The tracer's writer thread does not show through CPython 3.12+'s warning at os.fork() in a
// process with more than one thread (preload/cpython/fork_check.h): a program of one thread
// that forks prints the same traced and untraced, with the warning shown (-W always) or made
// an error (-W error::DeprecationWarning), and its trace loses nothing made while the writer
// was away; a program with a thread of its own is warned traced as untraced.
#include <fmt/core.h>

#include <regex>

#include "e2e_support.h"
#include "report_view.h"

namespace growtrace::e2e {
namespace {

const std::string kWarning = "is multi-threaded, use of fork() may lead to deadlocks in the child.";

// stderr without the tracer's own lines, each pid replaced by N.
std::string program_err(const std::string& err) {
    std::string kept;
    size_t begin = 0;
    while (begin < err.size()) {
        size_t end = err.find('\n', begin);
        end = end == std::string::npos ? err.size() : end + 1;
        std::string line = err.substr(begin, end - begin);
        if (!line.starts_with("growtrace: ")) kept += line;
        begin = end;
    }
    return std::regex_replace(kept, std::regex(R"(pid=\d+)"), "pid=N");
}

size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

class PythonFork : public ::testing::TestWithParam<PythonUnderTest> {
protected:
    void SetUp() override {
        GT_SKIP_UNLESS_INSTALLED(GetParam(), false);
        if (GetParam().name < "3.12") GTEST_SKIP() << "CPython " << GetParam().name << " does not warn at fork";
    }

    // fork_alone.py THREADS under -W `filter`, untraced then traced to `trace`: both results.
    std::pair<ProcessResult, ProcessResult> both_ways(const ScratchDir& dir, const std::string& trace,
                                                      const std::string& filter, const std::string& threads) {
        std::vector<std::string> program{GetParam().python, "-W", filter, kPythonPrograms + "fork_alone.py", threads};
        ProcessResult plain = run_process(program, {.timeout_seconds = 60});
        std::vector<std::string> run{"run", "-o", trace, "--"};
        run.insert(run.end(), program.begin(), program.end());
        ProcessResult traced = growtrace(run, {.cwd = dir.path().string(), .timeout_seconds = 120});
        EXPECT_EQ(plain.exit_code, 0) << plain.err;
        EXPECT_EQ(traced.exit_code, plain.exit_code) << traced.err;
        EXPECT_EQ(traced.out, plain.out);
        EXPECT_EQ(program_err(traced.err), program_err(plain.err));
        return {plain, traced};
    }
};

TEST_P(PythonFork, AProgramOfOneThreadIsNotWarnedUnderTheTracer) {
    ScratchDir dir;
    const std::string trace = dir / "alone.gtrace";
    auto [plain, traced] = both_ways(dir, trace, "always", "0");
    EXPECT_EQ(plain.out,
              "fork_alone: child 0 ended with 0\nfork_alone: child 1 ended with 0\nfork_alone: child 2 ended with 0\n"
              "fork_alone: 120 blocks kept, 1 thread(s)\n");
    EXPECT_EQ(count_of(traced.err, kWarning), 0u) << traced.err;

    // What the parent kept right after each fork, while its writer thread was away, is all there.
    nlohmann::json json = analyze_json(dir, trace);
    EXPECT_TRUE(json.value("ended_cleanly", false));
    Report report(json);
    auto site = report.stack_at("keep_after_fork", "fork_alone.py", python_mark("fork_alone.py", "keep_after_fork"));
    ASSERT_TRUE(site) << report.summary();
    EXPECT_EQ(site->live_count, 120u);
    size_t children = 0;
    for (const std::string& name : dir.files())
        children += name.starts_with("alone.") && name.ends_with(".gtrace") && name != "alone.gtrace";
    EXPECT_EQ(children, 3u);

    auto [plain_error, traced_error] = both_ways(dir, dir / "error.gtrace", "error::DeprecationWarning", "0");
    EXPECT_EQ(traced_error.out, plain.out);
}

TEST_P(PythonFork, AProgramWithAThreadOfItsOwnIsWarnedAsUntraced) {
    ScratchDir dir;
    auto [plain, traced] = both_ways(dir, dir / "threads.gtrace", "always", "1");
    EXPECT_EQ(count_of(plain.err, kWarning), 3u) << plain.err;
    EXPECT_EQ(count_of(traced.err, kWarning), 3u) << traced.err;
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonFork, ::testing::ValuesIn(pythons_under_test()), python_test_name);

}  // namespace
}  // namespace growtrace::e2e
