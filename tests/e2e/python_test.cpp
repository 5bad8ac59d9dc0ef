// CPython end to end (issue #3): Python programs traced with `growtrace run`, their JSON
// analysis checked. The openai #2672 reproduction runs against its local mock server in the
// project's venv (tools/setup_python.sh); the stdlib programs run on the shared-library Python
// of the venv and on Debian's statically linked /usr/bin/python3.11. The classification tests
// (PythonModes) run both full and sampled (--sample 512K, issue #12) and must give the same
// verdicts; where a program is too small for sampling it is run bigger in the sampled mode.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "e2e_support.h"

namespace growtrace::e2e {
namespace {

using nlohmann::json;

const std::string kSource = GT_SOURCE_DIR;
const std::string kPrograms = kPythonPrograms;


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

class PythonModes : public ::testing::TestWithParam<TraceMode> {
protected:
    bool sampled() const { return GetParam() == TraceMode::Sampled; }
    json trace(const ScratchDir& dir, const std::string& python, std::vector<std::string> args) const {
        return trace_python(dir, python, std::move(args), GetParam());
    }
};

INSTANTIATE_TEST_SUITE_P(Mode, PythonModes, ::testing::Values(TraceMode::Full, TraceMode::Sampled),
                         [](const ::testing::TestParamInfo<TraceMode>& info) { return mode_name(info.param); });

// The cache and class records stay exact in sampled mode: the #2672 verdict does not depend on
// the sampling; only the memory the cache holds is an estimate (with its samples).
TEST_P(PythonModes, OpenAIThreadsModeIsAGrowingCacheKeyedOnGeneratedClasses) {
    ScratchDir dir;
    json report = trace(dir, kVenvPython, {kPrograms + "openai_repro/repro.py", "--mode", "threads", "--requests", "24"});
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
}

// --no-python-objects leaves pymalloc unhooked (the fast mode, like memray without
// --trace-python-allocators): the cache, its key classes and the memory its misses took from
// malloc are still there.
TEST(Python, OpenAIThreadsModeWithoutPythonObjectHooksStillFindsTheCache) {
    ScratchDir dir;
    std::string trace = dir / "fast.gtrace";
    ProcessResult r = growtrace({"run", "--no-python-objects", "-o", trace, "--", kVenvPython,
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
    json full = trace_python(dir, kVenvPython, {kPrograms + "openai_repro/repro.py", "--mode", "threads", "--requests", "24"});
    EXPECT_LT(report["totals"]["allocations"].get<uint64_t>() * 3, full["totals"]["allocations"].get<uint64_t>());
}

TEST_P(PythonModes, OpenAISingleThreadHasNoFinding) {
    ScratchDir dir;
    json report = trace(dir, kVenvPython, {kPrograms + "openai_repro/repro.py", "--mode", "single", "--requests", "30"});
    EXPECT_TRUE(report["findings"].empty()) << report["findings"].dump().substr(0, 2000);
    bool seen = false;
    for (const json& c : report["caches"]) seen |= c["name"] == "openai._models._CachedTypeAdapter";
    EXPECT_TRUE(seen) << "the cache is followed, and judged not to grow";
}

TEST_P(PythonModes, StdlibCopyOfTheOpenAIPatternOnTheStaticPython) {
    ScratchDir dir;
    // Sampled: 300 requests, values with a 128 KiB buffer and classes holding 128 KiB, so that the
    // stacks of the cache's entries and of the classes hold enough samples to be judged.
    const int requests = sampled() ? 300 : 150;
    std::vector<std::string> args{kPrograms + "lru_growth.py", "--requests", std::to_string(requests)};
    if (sampled()) args.insert(args.end(), {"--buffer", "131072", "--class-payload", "131072"});
    json report = trace(dir, kStaticPython, args);
    auto caches = findings_of_kind(report, "cache_growth");
    ASSERT_EQ(caches.size(), 1u) << report["findings"].dump().substr(0, 2000);
    const json& cache = caches[0]["cache"];
    EXPECT_EQ(cache["name"], "__main__.adapter_for");
    EXPECT_EQ(cache["location"], kPrograms + "lru_growth.py:" + std::to_string(python_mark("lru_growth.py", "cache_created")));
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
    ScratchDir dir;
    std::string trace = dir / "first.gtrace";
    std::vector<std::string> args{"run"};
    for (const std::string& o : mode_options(GetParam())) args.push_back(o);
    args.insert(args.end(), {"-o", trace, "--", kStaticPython, kPrograms + "exec_python.py", "--requests", "60"});
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
TEST(Python, DumpShowsTheAgentsRecords) {
    ScratchDir dir;
    std::string trace = dir / "dump.gtrace";
    trace_program(dir, trace, {kStaticPython, kPrograms + "lru_growth.py", "--requests", "20"});
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
class StackCapture : public ::testing::TestWithParam<std::string> {};

TEST_P(StackCapture, EveryIncrementalCaptureEqualsAFullWalk) {
    ScratchDir dir;
    ProcessResult r = growtrace({"run", "-o", dir / "shapes.gtrace", "--", GetParam(), kPrograms + "stack_shapes.py"},
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

INSTANTIATE_TEST_SUITE_P(Interpreters, StackCapture, ::testing::Values(kVenvPython, kStaticPython),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             return info.param == kStaticPython ? "StaticPython" : "SharedLibraryPython";
                         });

TEST_P(PythonModes, BoundedLruFedEndlessKeysIsNotAFinding) {
    ScratchDir dir;
    json report = trace(dir, kVenvPython, {kPrograms + "bounded_lru.py"});
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

TEST_P(PythonModes, UnboundedCacheOverFiniteKeysIsNotAFinding) {
    ScratchDir dir;
    json report = trace(dir, kStaticPython, {kPrograms + "finite_keys_cache.py"});
    EXPECT_TRUE(findings_of_kind(report, "cache_growth").empty()) << report["findings"].dump().substr(0, 2000);
}

TEST_P(PythonModes, StdlibCachesAtTheirLimitsAreNotFindings) {
    ScratchDir dir;
    json report = trace(dir, kVenvPython, {kPrograms + "re_typing_caches.py"});
    EXPECT_TRUE(findings_of_kind(report, "cache_growth").empty()) << report["findings"].dump().substr(0, 2000);
}

TEST_P(PythonModes, GrowingDictIsUnboundedGrowthWithItsPythonFrames) {
    ScratchDir dir;
    json report = trace(dir, kVenvPython, {kPrograms + "growing_dict.py"});
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
    ScratchDir dir;
    json report = trace(dir, kStaticPython, {kPrograms + "types_churn.py"});
    EXPECT_TRUE(findings_of_kind(report, "duplicate_types").empty()) << report["findings"].dump().substr(0, 2000);
    bool payload = false;
    for (const json& t : report["types"]) {
        if (t["name"] != "__main__.Payload") continue;
        payload = true;
        EXPECT_LE(t["live_at_end"].get<int>(), 200) << t.dump().substr(0, 500);
    }
    EXPECT_TRUE(payload) << report["types"].dump().substr(0, 2000);
}

}  // namespace
}  // namespace growtrace::e2e
