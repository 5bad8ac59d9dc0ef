// Containers measured by the CPython agent's walks (docs/containers.md): the judgement of their
// entry counts over time, and the root cause a growing one becomes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyzer/analysis/analysis.h"
#include "analyzer/model/containers.h"
#include "analyzer/report/report_json.h"
#include "analyzer/analysis/root_causes.h"

namespace growtrace {
namespace {

ContainerRecord walk(uint64_t id, uint64_t ticks, uint64_t entries, const std::string& name = "app._SEEN") {
    ContainerRecord r;
    r.container_id = id;
    r.ticks = ticks;
    r.entries = entries;
    r.kind = ContainerRecord::Dict;
    r.name = name;
    r.owner_type = "app";
    r.key_types = {"str"};
    r.value_types = {"dict"};
    return r;
}

// One walk per second (ticks are seconds here) for 20 s, entries as `count(t)` says.
template <typename F>
ContainerFinding judge(F count, uint64_t table_stack = 7, std::vector<uint64_t> entry_stacks = {9}) {
    ContainerTracker tracker;
    for (uint64_t t = 0; t <= 20; ++t) tracker.on_container(walk(1, t, count(t)), table_stack, entry_stacks);
    auto found = tracker.finish([](uint64_t ticks) { return static_cast<double>(ticks); }, 0);
    EXPECT_EQ(found.size(), 1u);
    return found.empty() ? ContainerFinding{} : found.front();
}

// Growth is judged on the program's work, not the clock: a program starved for the first half of
// its run (a busy machine) between two walks that saw the same size, then filling steadily, has
// grown in every quarter of its work. On the clock alone it grew in the last two quarters only.
TEST(ContainerTracker, AStallBetweenWalksIsNotAPlateauOfTheWork) {
    ContainerTracker tracker;
    const std::vector<std::pair<uint64_t, uint64_t>> walks = {{0, 2500}, {10, 2500}, {12, 5000}, {14, 7500},
                                                              {16, 10000}, {18, 12500}, {20, 15000}};
    for (const auto& [t, entries] : walks) tracker.on_container(walk(1, t, entries), 7, {9});
    auto seconds = [](uint64_t ticks) { return static_cast<double>(ticks); };
    // No work from 0 s to 10 s (one unit at the start), then a unit of work a second.
    auto work = [](double s) { return s <= 10 ? s / 10 : 1 + (s - 10); };
    auto by_work = tracker.finish(seconds, 0, work);
    ASSERT_EQ(by_work.size(), 1u);
    EXPECT_TRUE(by_work[0].unbounded) << by_work[0].reason;
    auto by_clock = tracker.finish(seconds, 0);
    ASSERT_EQ(by_clock.size(), 1u);
    EXPECT_FALSE(by_clock[0].unbounded) << by_clock[0].reason;
}

TEST(ContainerTracker, EntriesRisingThroughTheRunAreAFinding) {
    ContainerFinding f = judge([](uint64_t t) { return 100 + 50 * t; });
    EXPECT_TRUE(f.unbounded) << f.reason;
    EXPECT_EQ(f.name, "app._SEEN");
    EXPECT_EQ(f.kind, "dict");
    EXPECT_TRUE(f.reached_from_module);
    EXPECT_EQ(f.entries_first, 100u);
    EXPECT_EQ(f.entries_last, 1100u);
    EXPECT_DOUBLE_EQ(f.growth_entries_per_s, 50.0);
    EXPECT_EQ(f.walks, 21u);
    EXPECT_EQ(f.insert_stacks, std::vector<uint64_t>{7});
    EXPECT_EQ(f.entry_stacks, std::vector<uint64_t>{9});
    EXPECT_EQ(f.key_types, std::vector<std::string>{"str"});
    EXPECT_EQ(f.entries_over_time.size(), 21u);
}

TEST(ContainerTracker, ABoundedDictThatFilledEarlyIsNotAFinding) {
    ContainerFinding f = judge([](uint64_t t) { return std::min<uint64_t>(300, 100 * t); });
    EXPECT_FALSE(f.unbounded);
    EXPECT_NE(f.reason.find("stopped growing"), std::string::npos) << f.reason;
}

TEST(ContainerTracker, EntriesThatComeAndGoAreNotAFinding) {
    // Appended to and cleared every 250 items: at the quarters' ends it may look higher each
    // time, but it falls back to nothing in every quarter.
    ContainerFinding f = judge([](uint64_t t) { return (t * 97) % 250 + (t == 20 ? 240 : 0); });
    EXPECT_FALSE(f.unbounded);
    EXPECT_TRUE(f.reason.find("come and go") != std::string::npos || f.reason.find("stopped") != std::string::npos ||
                f.reason.find("only") != std::string::npos)
        << f.reason;
}

TEST(ContainerTracker, TooFewWalksOrTooLittleGrowthAreNotFindings) {
    ContainerTracker tracker;
    tracker.on_container(walk(1, 0, 100), 0, {});
    tracker.on_container(walk(1, 5, 5000), 0, {});
    auto found = tracker.finish([](uint64_t ticks) { return static_cast<double>(ticks); }, 0);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_FALSE(found[0].unbounded);
    EXPECT_NE(found[0].reason.find("2 walks"), std::string::npos) << found[0].reason;

    ContainerFinding small = judge([](uint64_t t) { return 100 + 2 * t; });
    EXPECT_FALSE(small.unbounded);
    EXPECT_NE(small.reason.find("only"), std::string::npos) << small.reason;
}

TEST(ContainerTracker, WalksAfterTheShutdownMarkDecideNothing) {
    ContainerTracker tracker;
    for (uint64_t t = 0; t <= 10; ++t) tracker.on_container(walk(1, t, 500), 0, {});
    for (uint64_t t = 11; t <= 20; ++t) tracker.on_container(walk(1, t, 500 + 100 * t), 0, {});
    auto found = tracker.finish([](uint64_t ticks) { return static_cast<double>(ticks); }, 10);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_FALSE(found[0].unbounded) << found[0].reason;
    EXPECT_EQ(found[0].entries_last, 500u);
}

Frame py(const std::string& function, const std::string& file, uint32_t line) {
    return Frame{0, function, file, line, "python"};
}

GroupReport growing_stack(std::vector<Frame> frames, std::vector<uint64_t> ids, uint64_t bytes) {
    GroupReport g;
    g.frames = std::move(frames);
    g.stack_ids = std::move(ids);
    g.retained_bytes = bytes;
    g.verdict.cls = GrowthClass::Unbounded;
    g.verdict.slope_bytes_per_s = 100;
    return g;
}

// A registry filled at register:12 from handle:30; its entries made at make:5 (stack 9); a
// class made in the same call of handle; and an unrelated stack from elsewhere.
AnalysisResult registry_result() {
    AnalysisResult r;
    ContainerReport c;
    c.container.name = "lib.REGISTRY.by_name";
    c.container.kind = "dict";
    c.container.unbounded = true;
    c.container.entries_first = 10;
    c.container.entries_last = 1000;
    c.container.entry_stacks = {9};
    c.container.retained_bytes = 4000;
    c.container.growth_bytes_per_s = 100;
    c.inserted_from = {py("Registry.register", "/srv/lib.py", 12), py("handle", "/srv/app.py", 30),
                       py("<module>", "/srv/app.py", 90)};
    r.container_findings.push_back(c);
    TypeReport t;
    t.type.name = "lib.Handler";
    t.type.unbounded = true;
    t.created_from = {py("handle", "/srv/app.py", 29), py("<module>", "/srv/app.py", 90)};
    r.type_findings.push_back(t);
    r.findings.push_back(growing_stack({py("make", "/srv/app.py", 5), py("handle", "/srv/app.py", 31),
                                        py("<module>", "/srv/app.py", 90)},
                                       {9}, 4000));
    r.findings.push_back(growing_stack({py("other", "/srv/other.py", 3), py("<module>", "/srv/app.py", 95)}, {11}, 2000));
    return r;
}

TEST(ContainerRootCause, TheRegistryIsOneRootWithItsEntriesAndClassesUnderIt) {
    AnalysisResult r = registry_result();
    r.root_causes = find_root_causes(r);
    ASSERT_EQ(r.root_causes.size(), 2u);
    const RootCause& root = r.root_causes[0];
    EXPECT_EQ(root.root.kind, FindingKind::Container);
    EXPECT_EQ(root.title, "dict lib.REGISTRY.by_name keeps growing");
    EXPECT_NE(root.remedy.find("Registry.register (lib.py:12)"), std::string::npos) << root.remedy;
    ASSERT_EQ(root.members.size(), 2u);
    EXPECT_EQ(root.members[0].finding, (FindingRef{FindingKind::Stack, 0}));
    EXPECT_EQ(root.members[0].relation, Relation::HoldsEntries);
    EXPECT_EQ(root.members[1].finding, (FindingRef{FindingKind::Types, 0}));
    EXPECT_EQ(root.members[1].relation, Relation::SameCall);
    EXPECT_EQ(root.retained_bytes, 4000u) << "the entries' stacks are the container's own memory, counted once";
    EXPECT_EQ(r.root_causes[1].root, (FindingRef{FindingKind::Stack, 1}));

    // JSON: the container finding comes after the others, so that their ids do not move.
    nlohmann::json doc = report_json(r);
    ASSERT_EQ(doc["findings"].size(), 4u);
    EXPECT_EQ(doc["findings"][3]["kind"], "container_growth");
    EXPECT_EQ(doc["findings"][3]["container"]["name"], "lib.REGISTRY.by_name");
    EXPECT_EQ(doc["findings"][3]["role"], "root");
    EXPECT_EQ(doc["root_causes"][0]["finding"], 4);
    EXPECT_EQ(doc["root_causes"][0]["kind"], "container_growth");
    EXPECT_EQ(doc["findings"][0]["root_cause"], 1);  // the class
    EXPECT_EQ(doc["findings"][1]["root_cause"], 1);  // its entries' stack
    EXPECT_EQ(doc["findings"][2]["root_cause"], 2);
}

TEST(ContainerRootCause, AContainerFilledInTheSameCallAsAGrowingCacheIsEvidenceOfTheCache) {
    AnalysisResult r = registry_result();
    CacheReport cache;
    cache.cache.name = "lib.cached";
    cache.cache.unbounded = true;
    cache.inserted_from = {py("handle", "/srv/app.py", 28), py("<module>", "/srv/app.py", 90)};
    r.cache_findings.push_back(cache);
    r.root_causes = find_root_causes(r);
    ASSERT_FALSE(r.root_causes.empty());
    EXPECT_EQ(r.root_causes[0].root.kind, FindingKind::Cache);
    bool folded = false;
    for (const RootCauseMember& m : r.root_causes[0].members)
        folded |= m.finding == FindingRef{FindingKind::Container, 0} && m.relation == Relation::SameCall;
    EXPECT_TRUE(folded);
    for (const RootCause& root : r.root_causes) EXPECT_NE(root.root.kind, FindingKind::Container);
}

TEST(ContainerTracker, AContainerFilledByImportsIsStartUp) {
    auto py = [](const char* function, const char* file) { return Frame{0, function, file, 1, "python"}; };
    const Frame libc{0x1000, "malloc", "", 0, "/usr/lib/libc.so.6"};
    // sys.modules, filled by the import system; a base class's subclasses, by a class statement
    // in a module body (openai's lazily imported modules during its first requests).
    EXPECT_TRUE(filled_by_imports({libc, py("_load_unlocked", "<frozen importlib._bootstrap>"),
                                   py("_find_and_load", "<frozen importlib._bootstrap>"), py("handle", "/srv/app.py")}));
    EXPECT_TRUE(filled_by_imports({libc, py("<module>", "/lib/openai/resources/realtime.py"),
                                   py("_call_with_frames_removed", "<frozen importlib._bootstrap>")}));
    // A registry filled by a function, or by a script's own body (run without importlib), is work.
    EXPECT_FALSE(filled_by_imports({libc, py("register", "/lib/class_registry.py"), py("main", "/srv/app.py"),
                                    py("<module>", "/srv/app.py")}));
    EXPECT_FALSE(filled_by_imports({libc, py("<module>", "/srv/script.py")}));
    EXPECT_FALSE(filled_by_imports({}));
    EXPECT_FALSE(filled_by_imports({libc}));
}

}  // namespace
}  // namespace growtrace
