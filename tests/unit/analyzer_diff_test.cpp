// growtrace diff's comparison, on hand-made JSON analyses shaped like report_json's.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include "analyzer/analysis/analysis_diff.h"

namespace growtrace {
namespace {

using nlohmann::json;

json frame(const std::string& function, const std::string& file, int line, const std::string& module = "python") {
    return {{"function", function}, {"file", file}, {"line", line}, {"module", module}};
}

json cache_finding(const std::string& name) {
    return {{"kind", "cache_growth"}, {"cache", {{"name", name}}}, {"frames", json::array()}};
}

json stack_finding(int line) {
    return {{"kind", "unbounded_growth"},
            {"frames", {frame("malloc", "", 0, "libc.so.6"), frame("remember", "/srv/app/audit.py", line),
                        frame("handle", "/srv/app/server.py", 40)}}};
}

json root(size_t id, size_t finding, const std::string& kind, const std::string& title, double rate) {
    return {{"id", id},           {"finding", finding},        {"kind", kind}, {"title", title},
            {"summary", "figures"}, {"retained_bytes", 1000}, {"growth_bytes_per_s", rate}, {"members", json::array()}};
}

json analysis(json findings, json roots) {
    return {{"format_version", 1}, {"command", "python app.py"}, {"pid", 42}, {"duration_s", 10.0},
            {"findings", std::move(findings)}, {"root_causes", std::move(roots)}};
}

// Before: a cache and a stack grow. After: the cache is gone, the stack grows twice as fast
// (its line moved: another version of the code) and a new cache grows.
TEST(AnalysisDiff, RootCausesAreGoneStillGrowingOrNew) {
    const json before = analysis({cache_finding("app.adapter_for"), stack_finding(3)},
                                 {root(1, 1, "cache_growth", "cache app.adapter_for keeps growing", 5000),
                                  root(2, 2, "unbounded_growth", "memory allocated in remember keeps growing", 1000)});
    const json after = analysis({cache_finding("app.schema_for"), stack_finding(7)},
                                {root(1, 1, "cache_growth", "cache app.schema_for keeps growing", 800),
                                 root(2, 2, "unbounded_growth", "memory allocated in remember keeps growing", 2000)});
    const json d = diff_analyses(before, after);
    ASSERT_EQ(d["root_causes"].size(), 3u) << d.dump(2);
    EXPECT_EQ(d["root_causes"][0]["status"], "new");
    EXPECT_EQ(d["root_causes"][0]["title"], "cache app.schema_for keeps growing");
    EXPECT_EQ(d["root_causes"][1]["status"], "still_growing");
    EXPECT_EQ(d["root_causes"][1]["change"], "faster");
    EXPECT_EQ(d["root_causes"][2]["status"], "gone");
    EXPECT_EQ(d["root_causes"][2]["key"], "cache app.adapter_for");
    EXPECT_TRUE(diff_has_new_growth(d));

    std::ostringstream text;
    write_diff_text(d, text);
    EXPECT_NE(text.str().find("gone: cache app.adapter_for keeps growing"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("new: cache app.schema_for keeps growing"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("still growing, faster: memory allocated in remember"), std::string::npos) << text.str();
}

TEST(AnalysisDiff, AFixThatRemovesTheGrowthHasNoNewGrowth) {
    const json before = analysis({cache_finding("app.adapter_for")}, {root(1, 1, "cache_growth", "cache", 5000)});
    const json after = analysis(json::array(), json::array());
    const json d = diff_analyses(before, after);
    ASSERT_EQ(d["root_causes"].size(), 1u);
    EXPECT_EQ(d["root_causes"][0]["status"], "gone");
    EXPECT_FALSE(diff_has_new_growth(d));
    EXPECT_EQ(d["after"]["root_causes"], 0);
}

TEST(AnalysisDiff, RatesWithinAFactorAreTheSameAndSlowerIsSaid) {
    const json f = {stack_finding(3)};
    auto with_rate = [&](double rate) { return analysis(f, {root(1, 1, "unbounded_growth", "stack", rate)}); };
    EXPECT_EQ(diff_analyses(with_rate(1000), with_rate(1200))["root_causes"][0]["change"], "same");
    EXPECT_EQ(diff_analyses(with_rate(1000), with_rate(500))["root_causes"][0]["change"], "slower");
}

TEST(AnalysisDiff, AnAnalysisWithoutRootCausesIsRefusedWithTheReason) {
    json old = analysis({cache_finding("x")}, json::array());
    old.erase("root_causes");
    try {
        diff_analyses(old, old);
        FAIL() << "accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("older growtrace"), std::string::npos) << e.what();
    }
    EXPECT_THROW(diff_analyses(json::array(), old), std::invalid_argument);
}

}  // namespace
}  // namespace growtrace
