// Hand-written caches and registries (docs/containers.md): test_programs/python/containers.py
// fills one container per case under `growtrace run`, on every CPython version growtrace reads
// (and sampled on the 3.11 builds); the analyzer must name the ones that keep growing, where
// they are filled and what their newest entries are, and stay quiet about the others.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <string>
#include <tuple>
#include <vector>

#include "e2e_support.h"

namespace growtrace::e2e {
namespace {

using nlohmann::json;

class Containers : public ::testing::TestWithParam<std::tuple<PythonUnderTest, TraceMode>> {
protected:
    const PythonUnderTest& python() const { return std::get<0>(GetParam()); }
    bool sampled() const { return std::get<1>(GetParam()) == TraceMode::Sampled; }

    json run_case(const ScratchDir& dir, const std::string& which, std::vector<std::string> extra = {}) const {
        std::vector<std::string> args{python().python, kPythonPrograms + "containers.py", "--case", which};
        args.insert(args.end(), extra.begin(), extra.end());
        const std::string trace = dir / "containers.gtrace";
        trace_program(dir, trace, args, 0, mode_options(std::get<1>(GetParam())));
        return analyze_json(dir, trace);
    }
};

std::string containers_test_name(const ::testing::TestParamInfo<std::tuple<PythonUnderTest, TraceMode>>& info) {
    ::testing::TestParamInfo<PythonUnderTest> py(std::get<0>(info.param), info.index);
    return python_test_name(py) + "_" + mode_name(std::get<1>(info.param));
}

std::vector<PythonUnderTest> pythons_3_11() {
    std::vector<PythonUnderTest> out;
    for (const PythonUnderTest& p : pythons_under_test())
        if (p.name.starts_with("3.11")) out.push_back(p);
    return out;
}

INSTANTIATE_TEST_SUITE_P(Interpreters, Containers,
                         ::testing::Combine(::testing::ValuesIn(pythons_under_test()), ::testing::Values(TraceMode::Full)),
                         containers_test_name);
INSTANTIATE_TEST_SUITE_P(Sampled, Containers,
                         ::testing::Combine(::testing::ValuesIn(pythons_3_11()), ::testing::Values(TraceMode::Sampled)),
                         containers_test_name);

// The container_growth finding named `name`: the root of its root cause, and every other growing
// container of the report (the interpreter's own list of a class's subclasses grows beside a
// registry of classes) is evidence under it, when the stacks that fill them are known (sampled,
// their blocks are seldom samples).
json container_root(const json& report, const std::string& name, bool others_under_it = true) {
    json found = json::object();
    for (const json& f : findings_of_kind(report, "container_growth"))
        if (f["container"]["name"] == name) found = f;
    if (found.empty()) {
        ADD_FAILURE() << name << " is not a finding: " << report["findings"].dump().substr(0, 3000);
        return found;
    }
    EXPECT_EQ(found["role"], "root") << found.dump().substr(0, 1000);
    for (const json& f : findings_of_kind(report, "container_growth"))
        if (others_under_it) {
            EXPECT_EQ(f["root_cause"], found["root_cause"]) << f.dump().substr(0, 1000);
        }
    return found;
}

// A container the walks measured and judged not to grow, from the report's other containers.
json quiet_container(const json& report, const std::string& name) {
    EXPECT_TRUE(findings_of_kind(report, "container_growth").empty()) << report["findings"].dump().substr(0, 3000);
    for (const json& c : report["containers"])
        if (c["name"] == name) return c;
    ADD_FAILURE() << name << " was not measured: " << report["containers"].dump().substr(0, 3000);
    return json::object();
}

bool contains(const json& names, const std::string& name) {
    for (const json& n : names)
        if (n == name) return true;
    return false;
}

TEST_P(Containers, ModuleDictKeyedOnRequestIdsIsNamedAndFilledAtItsLine) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    json report = run_case(dir, "request_cache");
    EXPECT_TRUE(findings_of_kind(report, "cache_growth").empty());
    json f = container_root(report, "__main__._RESPONSES", !sampled());
    const json& c = f["container"];
    EXPECT_EQ(c["kind"], "dict");
    EXPECT_EQ(c["owner_type"], "__main__");
    EXPECT_TRUE(c["reached_from_module"].get<bool>());
    EXPECT_GE(c["walks"].get<int>(), 4);
    EXPECT_GE(c["entries_last"].get<int>() - c["entries_first"].get<int>(), 2000) << c.dump().substr(0, 1000);
    EXPECT_EQ(c["entries_last"].get<int>(), 10000) << "the last walk, at exit, sees them all";
    EXPECT_TRUE(contains(c["key_types"], "str")) << c["key_types"];
    EXPECT_TRUE(contains(c["value_types"], "dict")) << c["value_types"];
    if (!sampled()) {
        // The dict's keys table is reallocated by the store that outgrows it.
        EXPECT_TRUE(has_frame(c["inserted_from"], "store_response", "containers.py",
                              python_mark("containers.py", "response_store")))
            << c["inserted_from"].dump();
        // Its entries' memory (the values made at make_value) is counted and folded under it.
        EXPECT_GT(c["retained_bytes"].get<uint64_t>(), 500'000u) << c.dump().substr(0, 1000);
    }
    const json& root = report["root_causes"][f["root_cause"].get<int>() - 1];
    EXPECT_EQ(root["kind"], "container_growth");
    EXPECT_EQ(root["title"], "dict __main__._RESPONSES keeps growing");
    for (const json& s : findings_of_kind(report, "unbounded_growth"))
        if (has_frame(s["frames"], "make_value", "containers.py")) {
            EXPECT_EQ(s["root_cause"], f["root_cause"]) << s.dump().substr(0, 1500);
        }
}

TEST_P(Containers, RegistryInsideAnObjectIsNamedByItsAttributePath) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    json report = run_case(dir, "registry");
    json f = container_root(report, "__main__.REGISTRY.by_name", !sampled());
    const json& c = f["container"];
    EXPECT_EQ(c["owner_type"], "__main__.Registry");
    EXPECT_TRUE(contains(c["value_types"], "type")) << c["value_types"];
    // The method's name is its qualified name from 3.11 on.
    const int line = python_mark("containers.py", "registry_store");
    if (!sampled()) {
        EXPECT_TRUE(has_frame(c["inserted_from"], "Registry.register", "containers.py", line) ||
                    has_frame(c["inserted_from"], "register", "containers.py", line))
            << c["inserted_from"].dump();
    }
    // One cause: the classes the registry keeps are evidence under it, not a root of their own.
    if (!sampled()) {
        for (const json& t : findings_of_kind(report, "duplicate_types")) {
            EXPECT_EQ(t["root_cause"], f["root_cause"]) << t.dump().substr(0, 800);
        }
    }
}

TEST_P(Containers, BoundedDictEvictingItsOldestKeyIsQuiet) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    json c = quiet_container(run_case(dir, "bounded"), "__main__._RECENT");
    EXPECT_EQ(c.value("verdict", ""), "bounded");
    EXPECT_GE(c.value("walks", 0), 4) << c.dump().substr(0, 1000);
    EXPECT_LE(c.value("entries_last", 0), 301);
}

// A loaded machine spaces the walks out (each waits 100 times its expected CPU time): here they
// are at least 1 s apart, longer than the program's paced work between two of them, so that
// every walk but the last is one the program waited for (it waits for the walks its verdicts
// need rather than for a time). growtrace run passes its own environment on to the program.
class RareWalks {
public:
    RareWalks() { setenv("GROWTRACE_CONTAINER_PERIOD", "1", 1); }
    ~RareWalks() { unsetenv("GROWTRACE_CONTAINER_PERIOD"); }
};

TEST_P(Containers, BoundedDictIsQuietWhenWalksAreRare) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    RareWalks rare;
    json c = quiet_container(run_case(dir, "bounded"), "__main__._RECENT");
    EXPECT_EQ(c.value("verdict", ""), "bounded");
    EXPECT_GE(c.value("walks", 0), 4) << c.dump().substr(0, 1000);
}

TEST_P(Containers, GrowingDictIsNamedWhenWalksAreRare) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    RareWalks rare;
    json f = container_root(run_case(dir, "request_cache"), "__main__._RESPONSES", !sampled());
    EXPECT_GE(f["container"]["walks"].get<int>(), 4);
}

TEST_P(Containers, ListAppendedToAndClearedIsQuiet) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    json c = quiet_container(run_case(dir, "cleared"), "__main__._BATCH");
    EXPECT_EQ(c.value("verdict", ""), "bounded");
    EXPECT_GE(c.value("walks", 0), 2) << c.dump().substr(0, 1000);
}

// Found by the heap pass, whose walks cost more: run longer than the module-level cases.
TEST_P(Containers, DictOnlyAClosureHoldsIsNamedByItsFunction) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    json f = container_root(run_case(dir, "closure", {"--count", "16000"}), "<closure of __main__.make_memo.<locals>.memo>.seen", !sampled());
    const json& c = f["container"];
    EXPECT_EQ(c["owner_type"], "__main__.make_memo.<locals>.memo");
    EXPECT_FALSE(c["reached_from_module"].get<bool>());
}

TEST_P(Containers, SetOfAnInstanceOnlyAThreadHoldsIsNamedByItsOwnerType) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    // The set lives only as long as the thread: longer than the other cases, for enough walks.
    json f = container_root(run_case(dir, "thread", {"--count", "20000"}), "<__main__.Collector instance>.sessions",
                            !sampled());
    const json& c = f["container"];
    EXPECT_EQ(c["owner_type"], "__main__.Collector");
    EXPECT_EQ(c["kind"], "set");
    EXPECT_TRUE(contains(c["value_types"], "tuple")) << c["value_types"];
}

// A deque's entries are in blocks of 64, each allocated by the append that needed it: the
// newest block's stack is its inserting line.
TEST_P(Containers, GrowingDequeIsNamedAndFilledAtItsLine) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    json f = container_root(run_case(dir, "deque"), "__main__._EVENTS", !sampled());
    const json& c = f["container"];
    EXPECT_EQ(c["kind"], "deque");
    EXPECT_EQ(c["entries_last"].get<int>(), 10000) << c.dump().substr(0, 1000);
    EXPECT_TRUE(contains(c["value_types"], "dict")) << c["value_types"];
    if (!sampled()) {
        EXPECT_TRUE(has_frame(c["inserted_from"], "record_event", "containers.py", python_mark("containers.py", "deque_store")))
            << c["inserted_from"].dump();
    }
}

// Paths into elements: a growing container held by an entry of a module-level dict or list is
// named by the subscript a person would type (the repr of a str or int key, a list's index).
TEST_P(Containers, DictHeldByTheLastValueOfAModuleDictIsNamedByItsKey) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    json report = run_case(dir, "element_dict");
    json f = container_root(report, "__main__.REGISTRIES['users'].by_id", !sampled());
    const json& c = f["container"];
    EXPECT_EQ(c["kind"], "dict");
    EXPECT_EQ(c["owner_type"], "__main__.Table");
    EXPECT_TRUE(c["reached_from_module"].get<bool>());
    EXPECT_EQ(c["entries_last"].get<int>(), 10000) << c.dump().substr(0, 1000);
    EXPECT_TRUE(contains(c["key_types"], "int")) << c["key_types"];
    const int line = python_mark("containers.py", "element_dict_store");
    if (!sampled()) {
        EXPECT_TRUE(has_frame(c["inserted_from"], "Table.put", "containers.py", line) ||
                    has_frame(c["inserted_from"], "put", "containers.py", line))
            << c["inserted_from"].dump();
    }
    EXPECT_EQ(report["root_causes"][f["root_cause"].get<int>() - 1]["title"],
              "dict __main__.REGISTRIES['users'].by_id keeps growing");
}

TEST_P(Containers, SetHeldByTheFirstItemOfAModuleListIsNamedByItsIndex) {
    GT_SKIP_UNLESS_INSTALLED(python(), false);
    ScratchDir dir;
    json f = container_root(run_case(dir, "element_list"), "__main__.HANDLERS[0].seen", !sampled());
    const json& c = f["container"];
    EXPECT_EQ(c["kind"], "set");
    EXPECT_EQ(c["owner_type"], "__main__.Handler");
    EXPECT_TRUE(contains(c["value_types"], "str")) << c["value_types"];
    const int line = python_mark("containers.py", "element_list_store");
    if (!sampled()) {
        EXPECT_TRUE(has_frame(c["inserted_from"], "Handler.handle", "containers.py", line) ||
                    has_frame(c["inserted_from"], "handle", "containers.py", line))
            << c["inserted_from"].dump();
    }
}

// A real library's registry (test_programs/python/marshmallow_registry.py): marshmallow keeps
// every Schema class made with a name in marshmallow.class_registry._registry. A service making
// one per customer form grows it: one root cause names the registry, and it leads the report.
class RealRegistry : public ::testing::TestWithParam<PythonUnderTest> {};

bool has_marshmallow(const PythonUnderTest& py) {
    return access(py.python.c_str(), X_OK) == 0 && run_process({py.python, "-c", "import marshmallow"}).exit_code == 0;
}

TEST_P(RealRegistry, MarshmallowClassRegistryFilledPerFormIsOneRootCauseLeadingTheReport) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, true);
    if (!has_marshmallow(py)) GTEST_SKIP() << py.python << " has no marshmallow (tools/python_requirements.txt)";
    ScratchDir dir;
    const std::string trace = dir / "marshmallow.gtrace";
    trace_program(dir, trace, {py.python, kPythonPrograms + "marshmallow_registry.py"});
    json report = analyze_json(dir, trace);
    json f = container_root(report, "marshmallow.class_registry._registry");
    const json& c = f["container"];
    EXPECT_EQ(c["kind"], "dict");
    EXPECT_EQ(c["owner_type"], "marshmallow.class_registry");
    EXPECT_GE(c["entries_last"].get<int>(), 6000) << "two keys per form: " << c.dump().substr(0, 1000);
    EXPECT_TRUE(contains(c["value_types"], "list")) << c["value_types"];
    EXPECT_TRUE(has_frame(c["inserted_from"], "register", "class_registry.py")) << c["inserted_from"].dump();
    // It leads the report, one root cause naming it, with the stacks that make the classes it
    // keeps (their fields, validators, hooks) folded under it: the most evidence of any root.
    const json& root = report["root_causes"][0];
    EXPECT_EQ(root["finding"], f["id"]) << report["root_causes"].dump().substr(0, 3000);
    EXPECT_EQ(root["title"], "dict marshmallow.class_registry._registry keeps growing");
    size_t naming = 0;
    for (const json& r : report["root_causes"]) {
        naming += r["title"].get<std::string>().find("class_registry") != std::string::npos;
        if (r["id"] != root["id"]) {
            EXPECT_LT(r["members"].size(), root["members"].size()) << r.dump().substr(0, 1000);
        }
    }
    EXPECT_EQ(naming, 1u);
    EXPECT_GE(root["members"].size(), 10u) << root.dump().substr(0, 2000);
    // One cause: the copies and validators each load makes through a registered class grow in
    // step with the registry, under the line that fills it (grows_with_entries).
    EXPECT_EQ(report["root_causes"].size(), 1u) << report["root_causes"].dump().substr(0, 3000);
    EXPECT_TRUE(std::any_of(root["members"].begin(), root["members"].end(),
                            [](const json& m) { return m["relation"] == "grows_with_entries"; }))
        << root.dump().substr(0, 2000);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, RealRegistry, ::testing::ValuesIn(pythons_under_test()), python_test_name);

}  // namespace
}  // namespace growtrace::e2e
