// CPython end to end: Python programs traced with `growtrace run`, their JSON analysis checked,
// on every CPython version growtrace reads (pythons_under_test(): the project's venvs for 3.10
// to 3.13, tools/setup_python.sh, and Debian's statically linked /usr/bin/python3.11). The
// openai #2672 reproduction runs against its local mock server in each venv; Debian's static
// Python, which has no venv, runs the stdlib programs. The classification tests (PythonModes)
// also run sampled (--sample 512K) on the 3.11 builds and must give the same verdicts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "e2e_support.h"
#include "format/trace_format.h"
#include "report_view.h"

namespace growtrace::e2e {
namespace {

using nlohmann::json;

const std::string kSource = GT_SOURCE_DIR;
const std::string kPrograms = kPythonPrograms;


// Tests that depend on the interpreter only (full tracing), on every version.
class PythonVersions : public ::testing::TestWithParam<PythonUnderTest> {};

// The classification tests: every version traced in full, and the 3.11 builds sampled too
// (--sample 512K): both modes must give the same verdicts; where a program is too small for
// sampling it is run bigger in the sampled mode.
class PythonModes : public ::testing::TestWithParam<std::tuple<PythonUnderTest, TraceMode>> {
protected:
    const PythonUnderTest& python() const { return std::get<0>(GetParam()); }
    bool sampled() const { return std::get<1>(GetParam()) == TraceMode::Sampled; }
    json trace(const ScratchDir& dir, std::vector<std::string> args) const;
};

std::string mode_test_name(const ::testing::TestParamInfo<std::tuple<PythonUnderTest, TraceMode>>& info) {
    ::testing::TestParamInfo<PythonUnderTest> py(std::get<0>(info.param), info.index);
    return python_test_name(py) + "_" + mode_name(std::get<1>(info.param));
}

std::vector<PythonUnderTest> sampled_pythons() {
    std::vector<PythonUnderTest> out;
    for (const PythonUnderTest& p : pythons_under_test())
        if (p.name.starts_with("3.11")) out.push_back(p);
    return out;
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonModes,
                         ::testing::Combine(::testing::ValuesIn(pythons_under_test()), ::testing::Values(TraceMode::Full)),
                         mode_test_name);
INSTANTIATE_TEST_SUITE_P(Sampled, PythonModes,
                         ::testing::Combine(::testing::ValuesIn(sampled_pythons()), ::testing::Values(TraceMode::Sampled)),
                         mode_test_name);

// The line CPython runs a decorator at: its own from 3.11 on, the `def` below it before.
int decoration_line(const PythonUnderTest& py, const std::string& file, const std::string& mark) {
    return python_mark(file, mark) + (py.name == "3.10" ? 1 : 0);
}

json trace_python(const ScratchDir& dir, const std::string& python, std::vector<std::string> args,
                  TraceMode mode = TraceMode::Full) {
    EXPECT_EQ(access(python.c_str(), X_OK), 0) << python << " is missing: run tools/setup.sh";
    std::string trace = dir / "py.gtrace";
    args.insert(args.begin(), python);
    trace_program(dir, trace, args, 0, mode_options(mode));
    json report = analyze_json(dir, trace);
    EXPECT_EQ(report["sampling"]["mean_bytes"], mode == TraceMode::Sampled ? 524288 : 0);
    return report;
}

json PythonModes::trace(const ScratchDir& dir, std::vector<std::string> args) const {
    return trace_python(dir, python().python, std::move(args), std::get<1>(GetParam()));
}

// The cache and class records stay exact in sampled mode: the #2672 verdict does not depend on
// the sampling; only the memory the cache holds is an estimate (with its samples).
TEST_P(PythonModes, OpenAIThreadsModeIsAGrowingCacheKeyedOnGeneratedClasses) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, true);
    ScratchDir dir;
    json report = trace(dir, {kPrograms + "openai_repro/repro.py", "--mode", "threads", "--requests", "24"});
    auto caches = findings_of_kind(report, "cache_growth");
    ASSERT_EQ(caches.size(), 1u) << report["findings"].dump().substr(0, 2000);
    const json& cache = caches[0]["cache"];
    EXPECT_EQ(report["findings"][0]["kind"], "cache_growth") << "the cache finding leads the report";
    EXPECT_EQ(cache["name"], "openai._models._CachedTypeAdapter");
    EXPECT_NE(cache["location"].get<std::string>().find("openai/_models.py:"), std::string::npos) << cache["location"];
    EXPECT_TRUE(cache["maxsize"].is_null());
    EXPECT_GE(cache["entries_last"].get<int>() - cache["entries_first"].get<int>(), 40);  // 2 per request
    EXPECT_GT(cache["retained_bytes"].get<uint64_t>(), 1'000'000u);
    if (sampled()) {
        EXPECT_GE(cache["retained_samples"].get<uint64_t>(), 2u);
        EXPECT_GT(cache["retained_bytes_stderr"].get<double>(), 0);
    }
    EXPECT_TRUE(has_frame(cache["inserted_from"], "_validate_non_model_type", "openai/_models.py"))
        << cache["inserted_from"].dump();
    bool generated = false;
    for (const json& k : cache["key_types"]) {
        if (k["name"] == "openai.types.responses.parsed_response.ParsedResponseOutputMessage[Fact]") {
            generated = true;
            EXPECT_GE(k["distinct_classes"].get<int>(), 20) << k.dump();
            EXPECT_GE(k["live_classes"].get<int>(), 20) << k.dump();
        }
    }
    EXPECT_TRUE(generated) << cache["key_types"].dump();
    // Growing stacks, when pydantic's are judged so, can only be explained by this cache.
    for (const json& f : findings_of_kind(report, "unbounded_growth")) {
        if (!f["explained_by_cache"].is_null()) {
            EXPECT_EQ(f["explained_by_cache"], "openai._models._CachedTypeAdapter");
        }
    }
    // One cause, one root: the classes its keys miss on, the classes and stacks pydantic makes
    // for them and the memory of its entries are all evidence under the cache.
    ASSERT_EQ(report["root_causes"].size(), 1u) << report["root_causes"].dump().substr(0, 3000);
    const json& root = report["root_causes"][0];
    EXPECT_EQ(root["kind"], "cache_growth");
    EXPECT_EQ(root["title"], "cache openai._models._CachedTypeAdapter keeps growing");
    EXPECT_NE(root["remedy"].get<std::string>().find("re-created with the same name"), std::string::npos) << root["remedy"];
    EXPECT_EQ(root["members"].size() + 1, report["findings"].size());
    for (const json& f : report["findings"]) EXPECT_EQ(f["root_cause"], 1) << f.dump().substr(0, 1000);
    // No free lost under the hooks: the heap grows past pymalloc's first table of arenas, made
    // during the interpreter's start and freed from inside pymalloc when the table grows.
    const json& ledger = report["ledger"];
    EXPECT_TRUE(ledger.value("balanced", false)) << ledger.dump();
    EXPECT_EQ(ledger["tracer"]["inferred_frees"], 0) << ledger.dump();
}

// --no-python-objects leaves pymalloc unhooked (the fast mode, like memray without
// --trace-python-allocators): the cache, its key classes and the memory its misses took from
// malloc are still there.
TEST_P(PythonVersions, OpenAIThreadsModeWithoutPythonObjectHooksStillFindsTheCache) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, true);
    // Leaving pymalloc unhooked is one switch on every version (the cache's records and the
    // frames are what OpenAIThreadsModeIsAGrowingCache checks on each): the default and the
    // newest CPython, not all four (two traced runs of the reproduction each).
    if (py.name != "3.11" && py.name != "3.13") GTEST_SKIP() << "--no-python-objects: 3.11 and 3.13";
    ScratchDir dir;
    std::string trace = dir / "fast.gtrace";
    ProcessResult r = growtrace({"run", "--no-python-objects", "-o", trace, "--", py.python,
                                 kPrograms + "openai_repro/repro.py", "--mode", "threads", "--requests", "24"},
                                {.cwd = dir.path().string()});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    json report = analyze_json(dir, trace);
    auto caches = findings_of_kind(report, "cache_growth");
    ASSERT_EQ(caches.size(), 1u) << report["findings"].dump().substr(0, 2000);
    const json& cache = caches[0]["cache"];
    EXPECT_EQ(cache["name"], "openai._models._CachedTypeAdapter");
    EXPECT_GE(cache["entries_last"].get<int>() - cache["entries_first"].get<int>(), 40);
    EXPECT_GT(cache["retained_bytes"].get<uint64_t>(), 1'000'000u);
    bool generated = false;
    for (const json& k : cache["key_types"])
        generated |= k["name"] == "openai.types.responses.parsed_response.ParsedResponseOutputMessage[Fact]" &&
                     k["distinct_classes"].get<int>() >= 20;
    EXPECT_TRUE(generated) << cache["key_types"].dump();
    // Fewer events than with the hooks: small objects are not traced one by one.
    json full = trace_python(dir, py.python, {kPrograms + "openai_repro/repro.py", "--mode", "threads", "--requests", "24"});
    EXPECT_LT(report["totals"]["allocations"].get<uint64_t>() * 3, full["totals"]["allocations"].get<uint64_t>());
}

TEST_P(PythonModes, OpenAISingleThreadHasNoFinding) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, true);
    // The verdict on a cache that stops growing does not depend on the version; the records it
    // is judged on are checked on every version by OpenAIThreadsModeIsAGrowingCache.
    if (!sampled() && py.name != "3.10" && py.name != "3.12")
        GTEST_SKIP() << "the single-thread openai run, every allocation traced: 3.10 and 3.12";
    ScratchDir dir;
    json report = trace(dir, {kPrograms + "openai_repro/repro.py", "--mode", "single", "--requests", "30"});
    EXPECT_TRUE(report["findings"].empty()) << report["findings"].dump().substr(0, 2000);
    EXPECT_TRUE(report["root_causes"].empty()) << report["root_causes"].dump().substr(0, 2000);
    bool seen = false;
    for (const json& c : report["caches"]) seen |= c["name"] == "openai._models._CachedTypeAdapter";
    EXPECT_TRUE(seen) << "the cache is followed, and judged not to grow";
}

TEST_P(PythonModes, StdlibCopyOfTheOpenAIPattern) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    // 400 paced requests, so that a loaded machine does not flatten the curves. Sampled: values
    // with a 128 KiB buffer and classes holding 128 KiB, so that the stacks of the cache's
    // entries and of the classes hold enough samples to be judged.
    const int requests = 400;
    std::vector<std::string> args{kPrograms + "lru_growth.py", "--requests", std::to_string(requests), "--interval", "0.004"};
    if (sampled()) args.insert(args.end(), {"--buffer", "131072", "--class-payload", "131072"});
    json report = trace(dir, args);
    auto caches = findings_of_kind(report, "cache_growth");
    ASSERT_EQ(caches.size(), 1u) << report["findings"].dump().substr(0, 2000);
    const json& cache = caches[0]["cache"];
    EXPECT_EQ(cache["name"], "__main__.adapter_for");
    EXPECT_EQ(cache["location"],
              kPrograms + "lru_growth.py:" + std::to_string(decoration_line(py, "lru_growth.py", "cache_created")));
    EXPECT_EQ(cache["entries_last"].get<int>() - cache["entries_first"].get<int>(), 2 * requests);
    EXPECT_TRUE(has_frame(cache["inserted_from"], "handle_request", "lru_growth.py")) << cache["inserted_from"].dump();
    bool generated = false;
    for (const json& k : cache["key_types"]) {
        if (k["name"] == "__main__.ParsedMessage[Fact]") {
            generated = true;
            EXPECT_EQ(k["distinct_classes"], requests) << k.dump();
            EXPECT_EQ(k["live_classes"], requests) << k.dump();
        }
    }
    EXPECT_TRUE(generated) << cache["key_types"].dump();
    EXPECT_FALSE(findings_of_kind(report, "duplicate_types").empty());
    // What build_adapter allocates while adapter_for misses is the cache's memory; the classes
    // parametrize makes before the call are not.
    size_t explained = 0, not_explained = 0;
    for (const json& f : findings_of_kind(report, "unbounded_growth")) {
        if (has_frame(f["frames"], "adapter_for", "lru_growth.py", python_mark("lru_growth.py", "cache_compute"))) {
            EXPECT_EQ(f["explained_by_cache"], "__main__.adapter_for") << f.dump().substr(0, 1000);
            ++explained;
        } else if (has_frame(f["frames"], "parametrize", "lru_growth.py")) {
            EXPECT_TRUE(f["explained_by_cache"].is_null()) << f.dump().substr(0, 1000);
            ++not_explained;
        }
    }
    EXPECT_GE(explained, 1u) << report["findings"].dump().substr(0, 3000);
    EXPECT_GE(not_explained, 1u) << report["findings"].dump().substr(0, 3000);
}

// A traced Python that execs another: the agent's start-up folder is off PYTHONPATH in the
// first (the program sees its own environment) and back for the exec'd interpreter, whose
// trace then holds its cache.
TEST_P(PythonModes, AnExecdInterpreterGetsTheAgentBack) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    std::string trace = dir / "first.gtrace";
    std::vector<std::string> args{"run"};
    for (const std::string& o : mode_options(std::get<1>(GetParam()))) args.push_back(o);
    args.insert(args.end(), {"-o", trace, "--", py.python, kPrograms + "exec_python.py", "--requests", "60"});
    ProcessResult r = growtrace(args, {.cwd = dir.path().string(), .env = {{"PYTHONPATH", "/nonexistent/own"}}});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    EXPECT_NE(r.out.find("exec_python: PYTHONPATH='/nonexistent/own'"), std::string::npos) << r.out;
    json report = analyze_json(dir, dir / "first.exec1.gtrace");
    EXPECT_EQ(report["sampling"]["mean_bytes"], sampled() ? 524288 : 0) << "the exec'd image is traced the same way";
    auto caches = findings_of_kind(report, "cache_growth");
    ASSERT_EQ(caches.size(), 1u) << report["findings"].dump().substr(0, 2000);
    EXPECT_EQ(caches[0]["cache"]["name"], "__main__.adapter_for");
}

// growtrace dump prints the CPython records too.
TEST_P(PythonVersions, DumpShowsTheAgentsRecords) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    std::string trace = dir / "dump.gtrace";
    trace_program(dir, trace, {py.python, kPrograms + "lru_growth.py", "--requests", "20"});
    ProcessResult r = growtrace({"dump", trace});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("CacheCreate "), std::string::npos);
    EXPECT_NE(r.out.find("callable=\"__main__.adapter_for\""), std::string::npos);
    EXPECT_NE(r.out.find(" begin stack="), std::string::npos);
    EXPECT_NE(r.out.find("key=\"(__main__.ParsedText[Fact],)\""), std::string::npos) << r.out.substr(0, 3000);
    EXPECT_NE(r.out.find(" stored value_type="), std::string::npos);
    EXPECT_NE(r.out.find("TypeCreate "), std::string::npos);
    EXPECT_NE(r.out.find("class=\"__main__.ParsedMessage[Fact]\""), std::string::npos);
    EXPECT_NE(r.out.find("CacheSize "), std::string::npos);
    EXPECT_NE(r.out.find("Exiting ticks="), std::string::npos);
    EXPECT_EQ(r.out.find("(not decoded)"), std::string::npos);
}

// The tracer captures a Python stack against the thread's previous one, confirming the frames
// it has not walked (docs/cpython.md). With GROWTRACE_VERIFY_STACKS it also walks every stack
// whole and counts the captures that differ: none may, under any shape of stack.
class StackCapture : public ::testing::TestWithParam<PythonUnderTest> {};

TEST_P(StackCapture, EveryIncrementalCaptureEqualsAFullWalk) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    ProcessResult r = growtrace({"run", "-o", dir / "shapes.gtrace", "--", py.python, kPrograms + "stack_shapes.py"},
                                {.cwd = dir.path().string(), .env = {{"GROWTRACE_VERIFY_STACKS", "1"}}});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    unsigned long long captures = 0, confirmed = 0, differ = 1;
    size_t at = r.err.find("stack check: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    ASSERT_EQ(sscanf(r.err.c_str() + at, "stack check: %llu captures, %llu confirmed from memory, %llu differ",
                     &captures, &confirmed, &differ),
              3)
        << r.err;
    EXPECT_EQ(differ, 0u) << r.err;
    EXPECT_GT(captures, 100000u);
    EXPECT_GT(confirmed, captures / 2) << "the shortcut is hardly ever taken";
}

INSTANTIATE_TEST_SUITE_P(Interpreters, StackCapture, ::testing::ValuesIn(pythons_under_test()), python_test_name);

// A method memoized with lru_cache(maxsize=4096), fed ever-new keys: the report
// calls the cache bounded and must not, in the same breath, call the memory made at the
// method's own line unbounded growth. What the trace holds alive at that line is what the
// cache keeps (about two blocks per entry), the same after 30,000 requests as after 120,000.
TEST_P(PythonModes, MemoizedMethodFedEndlessKeysIsQuietAtItsOwnLine) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    const int line = python_mark("memoized_method.py", "value_made");
    auto held_at_line = [&](const json& report) {
        double held = 0;
        for (const char* list : {"findings", "groups"})
            for (const json& g : report[list]) {
                if (!g.contains("frames")) continue;
                for (const json& f : g["frames"])
                    if (f["file"].get<std::string>().ends_with("memoized_method.py")) {
                        if (f["line"] == line) held += g["live_allocations"].get<double>();
                        break;
                    }
            }
        return held;
    };
    std::vector<double> held;
    for (const char* requests : {"30000", "120000"}) {
        SCOPED_TRACE(requests);
        ScratchDir dir;
        json report = trace(dir, {kPrograms + "memoized_method.py", "--requests", requests});
        EXPECT_TRUE(report["findings"].empty()) << report["findings"].dump().substr(0, 2000);
        bool bounded = false;
        for (const json& c : report["caches"])
            if (c["name"].get<std::string>().ends_with("Pricer.price")) bounded = c["maxsize"] == 4096;
        EXPECT_TRUE(bounded) << report["caches"].dump().substr(0, 2000);
        held.push_back(held_at_line(report));
    }
    if (sampled()) return;  // the counts are estimates there; the verdicts above are what counts
    EXPECT_GT(held[0], 2 * 4096 - 64) << "the cache's values are not counted at their line";
    EXPECT_NEAR(held[1], held[0], 0.01 * held[0]) << "the live blocks at the method's line grow with the requests";
}

TEST_P(PythonModes, BoundedLruFedEndlessKeysIsNotAFinding) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    json report = trace(dir, {kPrograms + "bounded_lru.py", "--iterations", "30000"});
    EXPECT_TRUE(findings_of_kind(report, "cache_growth").empty()) << report["findings"].dump().substr(0, 2000);
    bool seen = false;
    for (const json& c : report["caches"])
        if (c["name"] == "__main__.render") {
            seen = true;
            EXPECT_EQ(c["maxsize"], 64);
            EXPECT_GT(c["insertions"].get<int>(), 1000);
        }
    EXPECT_TRUE(seen) << report["caches"].dump().substr(0, 2000);
}

// A sampled trace counts the misses of a cache with a maxsize instead of writing each one
// (CacheMisses, trace format 4): the cache stays quiet, and its line in the report still has every
// miss the program made, as in a full trace.
TEST_P(PythonModes, BoundedCacheShowsEveryMissWhetherCountedOrWritten) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    const std::string trace = dir / "py.gtrace";
    ProcessResult run = trace_program(dir, trace, {py.python, kPrograms + "bounded_lru.py", "--iterations", "10000"}, 0,
                                      mode_options(std::get<1>(GetParam())));
    const size_t at = run.out.find("misses=");
    ASSERT_NE(at, std::string::npos) << run.out;
    const int misses = std::stoi(run.out.substr(at + 7));
    EXPECT_EQ(misses, 10000);
    json report = analyze_json(dir, trace);
    EXPECT_EQ(report["trace_format_version"], sampled() ? format::kSampledVersion : format::kFullVersion);
    EXPECT_TRUE(findings_of_kind(report, "cache_growth").empty()) << report["findings"].dump().substr(0, 2000);
    bool seen = false;
    for (const json& c : report["caches"]) {
        if (c["name"] != "__main__.render") continue;
        seen = true;
        EXPECT_EQ(c["verdict"], "bounded");
        EXPECT_EQ(c["insertions"].get<int>(), misses) << "every miss, counted or written";
        // 64, or 65: the analyzer takes a store into a full cache as one entry more (the
        // eviction is not recorded), in both modes alike.
        EXPECT_GE(c["entries_last"].get<int>(), 64);
        EXPECT_LE(c["entries_last"].get<int>(), 65);
        EXPECT_TRUE(has_frame(c["inserted_from"], "main", "bounded_lru.py", python_mark("bounded_lru.py", "cache_call")))
            << c["inserted_from"].dump();
        EXPECT_FALSE(c["example_keys"].empty());
    }
    EXPECT_TRUE(seen) << report["caches"].dump().substr(0, 2000);
    ProcessResult text = growtrace({"analyze", trace});
    EXPECT_NE(text.out.find("__main__.render (bounded by its maxsize of 64 entries"), std::string::npos) << text.out;

    // How the misses were recorded: one by one in a full trace; in a sampled one, counted
    // except those that made a sample (a few hundred of 10,000 at 512K).
    ProcessResult dump = growtrace({"dump", trace});
    size_t begins = 0, pos = 0;
    while ((pos = dump.out.find(" begin stack=", pos)) != std::string::npos) ++begins, ++pos;
    if (sampled()) {
        EXPECT_NE(dump.out.find("CacheMisses "), std::string::npos);
        EXPECT_LT(begins, 3000u);
    } else {
        EXPECT_EQ(dump.out.find("CacheMisses "), std::string::npos);
        EXPECT_GE(begins, 10000u);
    }
}

TEST_P(PythonModes, UnboundedCacheOverFiniteKeysIsNotAFinding) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    json report = trace(dir, {kPrograms + "finite_keys_cache.py"});
    EXPECT_TRUE(findings_of_kind(report, "cache_growth").empty()) << report["findings"].dump().substr(0, 2000);
}

TEST_P(PythonModes, StdlibCachesAtTheirLimitsAreNotFindings) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    json report = trace(dir, {kPrograms + "re_typing_caches.py"});
    EXPECT_TRUE(findings_of_kind(report, "cache_growth").empty()) << report["findings"].dump().substr(0, 2000);
}

TEST_P(PythonModes, GrowingDictIsUnboundedGrowthWithItsPythonFrames) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    json report = trace(dir, {kPrograms + "growing_dict.py"});
    EXPECT_TRUE(findings_of_kind(report, "cache_growth").empty());
    bool found = false;
    for (const json& f : findings_of_kind(report, "unbounded_growth")) {
        found |= has_frame(f["frames"], "remember", "growing_dict.py", python_mark("growing_dict.py", "dict_store")) ||
                 has_frame(f["frames"], "main", "growing_dict.py", python_mark("growing_dict.py", "remember_call"));
        EXPECT_TRUE(f["explained_by_cache"].is_null()) << "no cache here";
    }
    EXPECT_TRUE(found) << report["findings"].dump().substr(0, 3000);
}

// Sampled, the class objects are seldom samples: the tracer follows their frees all the same,
// so the classes are known dead and none piles up.
TEST_P(PythonModes, ClassesCreatedAndDroppedAreNotDuplicateTypes) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    json report = trace(dir, {kPrograms + "types_churn.py"});
    EXPECT_TRUE(findings_of_kind(report, "duplicate_types").empty()) << report["findings"].dump().substr(0, 2000);
    bool payload = false;
    for (const json& t : report["types"]) {
        if (t["name"] != "__main__.Payload") continue;
        payload = true;
        EXPECT_LE(t["live_at_end"].get<int>(), 200) << t.dump().substr(0, 500);
    }
    EXPECT_TRUE(payload) << report["types"].dump().substr(0, 2000);
}

// Held versus garbage: same-named classes (and their data) that only full collections free,
// rare or none during the run, are garbage awaiting a collection, not growth. The agent reports
// full collections and runs one at the shutdown mark; what they free is counted dead since the
// full collection before. The same program keeping every class is still found.
TEST_P(PythonModes, ClassesOnlyFullCollectionsFreeAreNotGrowth) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    const std::string program = kPrograms + "gc_class_factory.py";
    const int schema_line = python_mark("gc_class_factory.py", "schema_created");
    // No full collection before the shutdown mark, then one every 1000 requests.
    for (const char* every : {"0", "1000"}) {
        SCOPED_TRACE(std::string("--collect-every ") + every);
        ScratchDir dir;
        json report = trace(dir, {program, "--requests", "3000", "--seconds", "1.5", "--window", "300", "--threshold2",
                                  "1000000", "--collect-every", every});
        EXPECT_TRUE(findings_of_kind(report, "duplicate_types").empty()) << report["findings"].dump().substr(0, 2000);
        for (const json& f : findings_of_kind(report, "unbounded_growth"))
            EXPECT_FALSE(has_frame(f["frames"], "handle_request", "gc_class_factory.py")) << f.dump().substr(0, 2000);
        bool schema = false;
        for (const json& t : report["types"]) {
            if (t["name"] != "__main__.Schema") continue;
            schema = true;
            EXPECT_EQ(t["created"], 3000);
            EXPECT_EQ(t["live_at_end"], 0) << "main() has returned: the shutdown collection frees them all";
        }
        EXPECT_TRUE(schema) << report["types"].dump().substr(0, 2000);
    }
    ScratchDir dir;
    json kept = trace(dir, {program, "--requests", "1500", "--seconds", "1", "--keep", "--collect-every", "500"});
    auto types = findings_of_kind(kept, "duplicate_types");
    ASSERT_EQ(types.size(), 1u) << kept["findings"].dump().substr(0, 2000);
    EXPECT_EQ(types[0]["type"]["name"], "__main__.Schema");
    EXPECT_EQ(types[0]["type"]["live_at_end"], 1500);
    if (!sampled() && py.name != "3.11-static") {  // the static build reports classes without their stack
        EXPECT_TRUE(has_frame(types[0]["frames"], "make_schema", "gc_class_factory.py", schema_line))
            << types[0]["frames"].dump();
    }
}

// Nothing after the shutdown mark decides a verdict, and a cache emptied at the very end of the
// work (cache_clear() at the end of the script, an atexit handler tearing its module down) is
// judged on the run before: 2500 entries over 1 s, a growing cache in every case.
TEST_P(PythonModes, CacheTornDownAtExitIsStillAGrowingCache) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    for (const std::string teardown : {"modules", "atexit", "clear"}) {
        SCOPED_TRACE("--teardown " + teardown);
        ScratchDir dir;
        std::vector<std::string> args{kPrograms + "teardown_cache.py", "--teardown", teardown};
        json report = trace(dir, args);
        auto caches = findings_of_kind(report, "cache_growth");
        ASSERT_EQ(caches.size(), 1u) << report["findings"].dump().substr(0, 2000) << report["caches"].dump().substr(0, 2000);
        const json& f = caches[0];
        EXPECT_EQ(f["cache"]["name"], "teardown_cache_mod.render");
        EXPECT_EQ(f["cache"]["insertions"], 2500);
        if (teardown == "modules") {
            // Torn down after the mark: that is shutdown, not the program's doing.
            EXPECT_TRUE(f["teardown_at_s"].is_null()) << f.dump().substr(0, 1000);
            EXPECT_EQ(f["cache"]["entries_last"], 2500);
            continue;
        }
        ASSERT_FALSE(f["teardown_at_s"].is_null()) << f.dump().substr(0, 1500);
        EXPECT_EQ(f["cache"]["entries_before_teardown"], 2500);
        EXPECT_GT(f["released_at_teardown_bytes"].get<uint64_t>(), sampled() ? 1'000'000u : 3'000'000u);
        ProcessResult text = growtrace({"analyze", dir / "py.gtrace"});
        EXPECT_NE(text.out.find("released at teardown"), std::string::npos) << text.out;
    }
}

// A cache filled and cleared within a run shorter than a sampled trace's second between polls
// of the caches' sizes: the only poll after the cache was made is the one at exit, and it must
// say the clear happened even though the size it reads, 0, is the size the last poll saw.
// (Under load, a 1-second run can go without a poll too: the flake of issue 25.)
TEST_P(PythonModes, AClearBeforeAnyPollIsSeenAtExit) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    json report = trace(dir, {kPrograms + "teardown_cache.py", "--teardown", "clear", "--requests", "400", "--seconds", "0.05"});
    const json* cache = nullptr;
    for (const json& c : report["caches"])
        if (c["name"] == "teardown_cache_mod.render") cache = &c;
    for (const json& f : report["findings"])
        if (f.contains("cache") && f["cache"]["name"] == "teardown_cache_mod.render") cache = &f["cache"];
    ASSERT_NE(cache, nullptr) << report["caches"].dump().substr(0, 2000);
    EXPECT_EQ((*cache)["insertions"], 400);
    EXPECT_EQ((*cache)["entries_last"], 0) << cache->dump().substr(0, 1500);
}

// A library making a schema class per call, all of which die (never more than 34 alive at once,
// 10 at the end): classes made in numbers but not a growing population.
TEST_P(PythonModes, SchemaClassesThatAllDieAreNotDuplicateTypes) {
    const PythonUnderTest& py = python();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    json report = trace(dir, {kPrograms + "schema_churn.py", "--seconds", "1"});
    EXPECT_TRUE(findings_of_kind(report, "duplicate_types").empty()) << report["findings"].dump().substr(0, 2000);
    bool schema = false;
    for (const json& t : report["types"]) {
        if (t["name"] != "__main__.Schema") continue;
        schema = true;
        // The static build's agent finds classes at collections: a few may slip between them.
        if (py.name == "3.11-static") EXPECT_GE(t["created"].get<int>(), 2900);
        else EXPECT_EQ(t["created"], 3000);
        EXPECT_EQ(t["live_at_end"], 10);
    }
    EXPECT_TRUE(schema) << report["types"].dump().substr(0, 2000);
}

// The tracer holds no reference that changes what the program keeps alive: after gc.collect()
// the program's own classes, instances and generated code objects, counted from
// gc.get_objects(), and the reference counts of a few of them, are the same traced and not.
TEST_P(PythonVersions, TracedProgramKeepsAliveWhatItWouldUntraced) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    std::vector<std::string> program = {py.python, kPrograms + "live_objects.py"};
    ProcessResult untraced = run_process(program, {.cwd = dir.path().string()});
    ASSERT_EQ(untraced.exit_code, 0) << untraced.err;
    EXPECT_NE(untraced.out.find("class:Made0=63"), std::string::npos) << untraced.out;
    ProcessResult traced = trace_program(dir, dir / "live.gtrace", program);
    EXPECT_EQ(traced.out, untraced.out);
}

// A program that calls what it finds in gc.callbacks by hand (nothing: the agent's callback is
// not there), removes what it did not add and empties the list works and prints as it does
// untraced; the collection at the shutdown mark is reported all the same.
TEST_P(PythonVersions, ProgramManagingGcCallbacksWorksTheSame) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    std::vector<std::string> program = {py.python, kPrograms + "gc_callbacks_user.py"};
    ProcessResult untraced = run_process(program, {.cwd = dir.path().string()});
    ASSERT_EQ(untraced.exit_code, 0) << untraced.err;
    EXPECT_NE(untraced.out.find("failures=0"), std::string::npos) << untraced.out;
    ProcessResult traced = trace_program(dir, dir / "cb.gtrace", program);
    EXPECT_EQ(traced.out, untraced.out);
    ProcessResult dump = growtrace({"dump", dir / "cb.gtrace"});
    EXPECT_NE(dump.out.find("start generation=2 at_shutdown"), std::string::npos) << "no collection at the mark";
    EXPECT_NE(dump.out.find("stop generation=2 at_shutdown"), std::string::npos);
}

// The agent reports collections from the collector's own list of callbacks: the program sees
// the gc.callbacks it would untraced (empty, len 0, the same list object every time), and what
// it puts there is called as untraced: the same arguments (3.12+ pass one phase string to all),
// order, stack, reference counts and referrers, exceptions to sys.unraisablehook, entries added
// or removed during a collection, a rebound gc.callbacks ignored by the collector.
TEST_P(PythonVersions, ProgramSeesTheGcCallbacksItWouldUntraced) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    std::vector<std::string> program = {py.python, kPrograms + "gc_callbacks_seen.py", "2"};
    ProcessResult untraced = run_process(program, {.cwd = dir.path().string()});
    ASSERT_EQ(untraced.exit_code, 0) << untraced.err;
    std::vector<std::string> expected = gc_callbacks_seen(untraced.out);
    ASSERT_EQ(expected.size(), 2u) << untraced.out;
    EXPECT_NE(expected[0].find(R"("initial": [0, "[]", "list", true, true, 3])"), std::string::npos) << expected[0];
    ProcessResult traced = trace_program(dir, dir / "seen.gtrace", program);
    EXPECT_EQ(traced.err.find("Traceback"), std::string::npos) << traced.err;
    EXPECT_EQ(gc_callbacks_seen(traced.out), expected);
    // The agent still reports full collections: two gc.collect() a round, one at the start of
    // each and one with the program's callbacks.
    EXPECT_GE(reported_full_collections(growtrace({"dump", dir / "seen.gtrace"}).out), 4u);
}

// The frames the tracer records are the interpreter's own: frame_check.py allocates blocks of
// unique sizes under stacks of many shapes (recursion, generators, methods, Python called back
// from C, exception handlers, comprehensions, coroutines, a thread) and writes the stack
// traceback.extract_stack() gives for each; the stack recorded for each block (read back with
// `growtrace dump`) must hold the same Python frames: files, lines and function names.
struct DumpedStacks {
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> nodes;  // id -> (parent, PyFrame id or 0)
    std::map<uint64_t, json> frames;                          // PyFrame id -> {file, function, line}
    std::map<uint64_t, uint64_t> stack_of_size;               // allocation size -> stack id

    static std::string quoted(const std::string& line, const std::string& key) {
        size_t at = line.find(key + "=\"");
        if (at == std::string::npos) return "";
        at += key.size() + 2;
        return line.substr(at, line.find('"', at) - at);
    }

    explicit DumpedStacks(const std::string& dump) {
        std::istringstream in(dump);
        for (std::string line; std::getline(in, line);) {
            unsigned long long a, b, c;
            int n;
            if (size_t at = line.find("StackNode id="); at != std::string::npos &&
                sscanf(line.c_str() + at, "StackNode id=%llu parent=%llu python_frame=%llu", &a, &b, &c) == 3) {
                nodes[a] = {b, c};
            } else if (at != std::string::npos && sscanf(line.c_str() + at, "StackNode id=%llu parent=%llu", &a, &b) == 2) {
                nodes[a] = {b, 0};
            } else if (size_t at = line.find("PyFrame id="); at != std::string::npos &&
                       sscanf(line.c_str() + at, "PyFrame id=%llu", &a) == 1) {
                size_t l = line.rfind(" line=");
                n = l == std::string::npos ? 0 : atoi(line.c_str() + l + 6);
                frames[a] = {{"file", quoted(line, "file")}, {"function", quoted(line, "function")}, {"line", n}};
            } else if (size_t at = line.find(" size="); line.find("AllocCompact") != std::string::npos &&
                       sscanf(line.c_str() + at, " size=%llu stack=%llu", &a, &b) == 2) {
                stack_of_size[a] = b;
            }
        }
    }

    // The Python frames of a stack, outermost first.
    std::vector<json> python_frames(uint64_t stack) const {
        std::vector<json> out;
        for (uint64_t id = stack; id;) {
            auto node = nodes.find(id);
            if (node == nodes.end()) break;
            if (uint64_t frame = node->second.second) out.insert(out.begin(), frames.at(frame));
            id = node->second.first;
        }
        return out;
    }
};

TEST_P(PythonVersions, RecordedFramesAreTheInterpretersOwn) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    std::string trace = dir / "frames.gtrace", expected_file = dir / "expected.json";
    trace_program(dir, trace, {py.python, kPrograms + "frame_check.py", expected_file});
    ProcessResult dump = growtrace({"dump", trace});
    ASSERT_EQ(dump.exit_code, 0) << dump.err;
    DumpedStacks stacks(dump.out);
    json expected = json::parse(read_file(expected_file));
    ASSERT_GE(expected.size(), 15u);
    for (const auto& [size_text, frames] : expected.items()) {
        uint64_t size = std::stoull(size_text) + 1;  // a bytearray keeps a NUL after its bytes
        ASSERT_TRUE(stacks.stack_of_size.count(size)) << "no allocation of " << size << " bytes";
        std::vector<json> got = stacks.python_frames(stacks.stack_of_size[size]);
        ASSERT_EQ(got.size(), frames.size()) << "block of " << size_text << ": expected " << frames.dump()
                                             << "\nrecorded " << json(got).dump();
        for (size_t i = 0; i < got.size(); ++i) {
            std::string name = frames[i][2], function = got[i]["function"];
            EXPECT_EQ(got[i]["file"], frames[i][0]) << size_text << " frame " << i;
            EXPECT_EQ(got[i]["line"], frames[i][1]) << size_text << " frame " << i << ": " << json(got).dump();
            // The tracer names a frame by its qualified name where the version has one.
            EXPECT_TRUE(function == name || function.ends_with("." + name)) << function << " for " << name;
        }
    }
}

// The tracer names frames without holding their code objects: code compiled at run time and
// dropped (as template engines do) is freed as it would be untraced.
TEST_P(PythonVersions, CodeCompiledAtRunTimeIsFreedAsUntraced) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    std::vector<std::string> program = {py.python, kPrograms + "compiled_code.py", "--rounds", "1500"};
    ProcessResult untraced = run_process(program, {.cwd = dir.path().string()});
    ASSERT_EQ(untraced.exit_code, 0) << untraced.err;
    ProcessResult traced = trace_program(dir, dir / "code.gtrace", program);
    EXPECT_NE(untraced.out.find("code_objects=3000 alive=0"), std::string::npos) << untraced.out;
    EXPECT_EQ(traced.out, untraced.out) << "the same code objects are alive after gc.collect()";
}

// A PyMem/PyObject_Realloc that fails leaves its block alive, and so does the trace: the
// bytearrays of failed_realloc.py (one in pymalloc's pools, one it passes to malloc) are all
// alive at the end, each line holding its object and its buffer.
TEST_P(PythonVersions, FailedReallocLeavesTheBlockAlive) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    constexpr unsigned kRounds = 400;
    json report = trace_python(dir, py.python, {kPrograms + "failed_realloc.py", "--rounds", std::to_string(kRounds)});
    Report view(report);
    for (auto [mark, buffer] : {std::pair{"small_block", 300u + 1}, std::pair{"large_block", 3000u + 1}}) {
        auto site = view.stack_at("main", "failed_realloc.py", python_mark("failed_realloc.py", mark));
        ASSERT_TRUE(site) << mark << ": " << view.summary();
        EXPECT_EQ(site->live_count, 2u * kRounds) << mark << ": every bytearray and its buffer live on";
        EXPECT_GE(site->live_bytes, uint64_t(kRounds) * buffer) << mark;
    }
}

// A detach stops the agent from a thread of the tracer's, which takes the GIL wherever the
// program's thread let it go: possibly half-way through one of the agent's walks. The walk's
// thread then comes back to an agent that was stopped under it, and must carry on (CI once saw
// the attached program die of SIGSEGV there, a few runs in a hundred). walk_interrupted.py
// makes that moment happen every time.
TEST_P(PythonVersions, AnAgentStoppedInTheMiddleOfAWalkLeavesTheProgramRunning) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    ProcessResult traced = trace_program(dir, dir / "walk.gtrace", {py.python, kPrograms + "walk_interrupted.py"});
    EXPECT_EQ(traced.exit_code, 0) << traced.describe() << "\n" << traced.err;
    EXPECT_EQ(traced.out, "survived the walk\nthen allocated 1000 objects\n") << traced.err;
}

// The shape of sys._debugmallocstats()'s report: its distinct lines with every number (and
// the spaces that align them) taken out, the rows of pymalloc's size-class table as one
// line. The figures, and which size classes are in use, depend on what the process did.
std::set<std::string> debug_malloc_stats_shape(const std::string& err) {
    static const std::regex row(R"(\s*\d+\s+\d+\s+\d+\s+\d+\s+\d+\s*)");
    static const std::regex numbers(R"([\d,]+)");
    static const std::regex spaces(R"(\s+)");
    std::set<std::string> shape;
    std::istringstream lines(err);
    for (std::string line; std::getline(lines, line);) {
        if (line.starts_with("growtrace: ")) continue;
        if (std::regex_match(line, row)) line = "<size class>";
        shape.insert(std::regex_replace(std::regex_replace(line, numbers, "#"), spaces, " "));
    }
    return shape;
}

// CPython's test_sys.test_debugmallocstats: sys._debugmallocstats() prints pymalloc's
// statistics only while pymalloc is the object allocator, which the tracer's PEP 445 hooks
// wrap; traced, it must print the same report as untraced, and still take no argument. Run
// isolated (-I) as CPython's test does, so without the agent, which starts from PYTHONPATH.
TEST_P(PythonVersions, DebugMallocStatsPrintsAsUntraced) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    std::vector<std::string> program = {
        py.python, "-I", "-c",
        "import sys\nsys._debugmallocstats()\ntry:\n    sys._debugmallocstats(True)\nexcept TypeError:\n"
        "    print('no argument')\n"};
    ProcessResult untraced = run_process(program, {.cwd = dir.path().string()});
    ASSERT_EQ(untraced.exit_code, 0) << untraced.err;
    ASSERT_NE(untraced.err.find("Small block threshold"), std::string::npos) << "pymalloc's report: " << untraced.err;
    ProcessResult traced = trace_program(dir, dir / "stats.gtrace", program);
    EXPECT_EQ(traced.out, untraced.out);
    EXPECT_EQ(debug_malloc_stats_shape(traced.err), debug_malloc_stats_shape(untraced.err))
        << "traced:\n" << traced.err << "\nuntraced:\n" << untraced.err;
    EXPECT_TRUE(debug_malloc_stats_shape(traced.err).count("<size class>")) << traced.err;
    json report = analyze_json(dir, dir / "stats.gtrace");
    EXPECT_GT(report["totals"]["allocations"].get<uint64_t>(), 1000u) << "the objects were traced all the same";
}

// gc.get_count() right after gc.collect() is near nothing (CPython's test_gc.test_get_count
// asserts fewer than 5): the container walks the agent runs in a collection's callback must not
// leave their objects counted as the program's young objects. Before the agent put the count
// back, a walk left 1,416 there (3.10, sampled).
TEST_P(PythonVersions, TheAgentsWalksLeaveTheYoungObjectCountAsTheyFoundIt) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    ScratchDir dir;
    ProcessResult traced =
        trace_program(dir, dir / "young.gtrace", {py.python, kPythonPrograms + "young_count.py", "--walks", "3"});
    ASSERT_EQ(traced.exit_code, 0) << traced.err;
    unsigned largest = 0, walks = 0;
    ASSERT_EQ(std::sscanf(traced.out.c_str(), "largest_young_count=%u walks=%u", &largest, &walks), 2) << traced.out;
    EXPECT_GE(walks, 3u) << "the walks ran in the collections' callbacks";
    EXPECT_LT(largest, 5u) << traced.out;
}

// Subinterpreters made one after another (CPython's own test_atexit subinterpreter tests): each
// runs sitecustomize, and the agent, whose state is one per process, stays out of them. Before,
// the second one released the objects of the first, which had ended, and crashed (3.12, sampled).
TEST_P(PythonVersions, SubinterpretersOneAfterAnotherRunAsUntraced) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    const std::vector<std::string> program = {py.python, "-m", "test", "test_atexit", "-m", "*Subinterpreter*"};
    ScratchDir dir;
    ProcessResult untraced = run_process(program, {.cwd = dir.path().string()});
    if (untraced.out.find("Tests result: SUCCESS") == std::string::npos)
        GTEST_SKIP() << py.python << " cannot run test_atexit untraced (no Lib/test?): " << untraced.out.substr(0, 500);
    for (const std::vector<std::string>& mode : {std::vector<std::string>{}, std::vector<std::string>{"--sample=512K"}}) {
        ProcessResult traced = trace_program(dir, dir / "subinterpreters.gtrace", program, 0, mode);
        EXPECT_NE(traced.out.find("Tests result: SUCCESS"), std::string::npos) << traced.out << traced.err;
    }
}

// An interpreter growtrace does not read (here pyenv's 3.9, when installed): one line saying so
// and what is missing, native tracing, and still the shutdown mark (sitecustomize registers the
// library's growtrace_program_exiting), so the cache the interpreter frees at exit is held.
TEST(UnsupportedPython, OneLineNativeStacksAndStillTheShutdownMark) {
    std::string python;
    const char* home = getenv("HOME");
    for (std::string root : {std::string("/root/.pyenv/versions"), std::string(home ? home : "/") + "/.pyenv/versions"}) {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(root, ec))
            if (entry.path().filename().string().starts_with("3.9.") && fs::exists(entry.path() / "bin/python3.9"))
                python = (entry.path() / "bin/python3.9").string();
    }
    if (python.empty()) GTEST_SKIP() << "no CPython 3.9 installed (pyenv)";
    ScratchDir dir;
    std::string trace = dir / "old.gtrace";
    ProcessResult r = trace_program(dir, trace, {python, kPrograms + "lru_growth.py", "--requests", "150"});
    size_t first = r.err.find("growtrace: Python 3.9.");
    ASSERT_NE(first, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("growtrace: Python 3.9.", first + 1), std::string::npos) << "one line: " << r.err;
    std::string line = r.err.substr(first, r.err.find('\n', first) - first);
    EXPECT_NE(line.find("not supported"), std::string::npos) << line;
    EXPECT_NE(line.find("native stacks only (no Python frames"), std::string::npos) << line;
    EXPECT_EQ(r.err.find("agent not started"), std::string::npos) << r.err;
    ProcessResult dump = growtrace({"dump", trace});
    EXPECT_NE(dump.out.find("Exiting ticks="), std::string::npos) << "no shutdown mark";
    json report = analyze_json(dir, trace);
    EXPECT_FALSE(findings_of_kind(report, "unbounded_growth").empty()) << report["findings"].dump().substr(0, 2000);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonVersions, ::testing::ValuesIn(pythons_under_test()), python_test_name);

}  // namespace
}  // namespace growtrace::e2e
