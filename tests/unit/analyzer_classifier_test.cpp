// Growth classifier on synthetic series: each shape must land in its class.
#include <gtest/gtest.h>

#include <random>

#include "analyzer/growth_classifier.h"

namespace growtrace {
namespace {

constexpr size_t kWindows = 200;
constexpr double kWindowS = 0.05;

GrowthSeries empty_series() {
    GrowthSeries s;
    s.window_s = kWindowS;
    s.births_bytes.assign(kWindows, 0);
    s.deaths_bytes.assign(kWindows, 0);
    s.survivor_bytes.assign(kWindows, 0);
    s.work_begin = 0;
    s.work_end = kWindows - 1;
    return s;
}

TEST(AnalyzerClassifier, LinearGrowthIsUnbounded) {
    GrowthSeries s = empty_series();
    for (size_t w = 0; w < kWindows; ++w) s.births_bytes[w] = s.survivor_bytes[w] = 10000;
    GrowthVerdict v = classify_growth(s);
    EXPECT_EQ(v.cls, GrowthClass::Unbounded) << v.reason;
    EXPECT_NEAR(v.slope_bytes_per_s, 10000 / kWindowS, 1);
    EXPECT_GT(v.confidence, 0.9);
    EXPECT_DOUBLE_EQ(v.retained_end, 10000.0 * kWindows);
}

TEST(AnalyzerClassifier, LateStartingLinearGrowthIsUnbounded) {
    GrowthSeries s = empty_series();
    for (size_t w = 120; w < kWindows; ++w) s.births_bytes[w] = s.survivor_bytes[w] = 5000;
    GrowthVerdict v = classify_growth(s);
    EXPECT_EQ(v.cls, GrowthClass::Unbounded) << v.reason;
    EXPECT_NEAR(v.started_at_s, 120 * kWindowS, 1e-9);
}

TEST(AnalyzerClassifier, HugeGrowthThenPlateauIsBounded) {
    // An LRU of 2 GB: fills for 60 windows, then evicts as much as it inserts.
    GrowthSeries s = empty_series();
    const double per_window = 2e9 / 60;
    for (size_t w = 0; w < kWindows; ++w) {
        s.births_bytes[w] = per_window;
        if (w >= 60) s.deaths_bytes[w] = per_window;
        if (w >= kWindows - 60) s.survivor_bytes[w] = per_window;
    }
    GrowthVerdict v = classify_growth(s);
    EXPECT_EQ(v.cls, GrowthClass::Bounded) << v.reason;
    EXPECT_NEAR(v.plateau_at_s, 54 * kWindowS, 0.2);
}

TEST(AnalyzerClassifier, TableLoadedAtStartupIsBounded) {
    GrowthSeries s = empty_series();
    for (size_t w = 0; w < 10; ++w) s.births_bytes[w] = s.survivor_bytes[w] = 50e6;
    GrowthVerdict v = classify_growth(s);
    EXPECT_EQ(v.cls, GrowthClass::Bounded) << v.reason;
}

TEST(AnalyzerClassifier, SingleLargeStartupAllocationIsNotUnbounded) {
    GrowthSeries s = empty_series();
    s.births_bytes[0] = s.survivor_bytes[0] = 500e6;
    GrowthVerdict v = classify_growth(s);
    EXPECT_TRUE(v.cls == GrowthClass::Bounded || v.cls == GrowthClass::Stable) << v.reason;
}

TEST(AnalyzerClassifier, SawtoothChurnIsTransient) {
    // Fills for 20 windows, then drops everything; ends mid-fill at a high level.
    GrowthSeries s = empty_series();
    double level = 0;
    for (size_t w = 0; w < kWindows; ++w) {
        s.births_bytes[w] = 1e6;
        level += 1e6;
        if (w % 20 == 19 && w != kWindows - 1) {
            s.deaths_bytes[w] = level;
            level = 0;
        }
    }
    for (size_t w = kWindows - 1; w >= 180; --w) s.survivor_bytes[w] = 1e6;
    GrowthVerdict v = classify_growth(s);
    EXPECT_EQ(v.cls, GrowthClass::Transient) << v.reason;
}

TEST(AnalyzerClassifier, GroupFreedBeforeTheEndIsTransient) {
    GrowthSeries s = empty_series();
    for (size_t w = 0; w < 100; ++w) s.births_bytes[w] = 1e6;
    s.deaths_bytes[150] = 100e6;
    EXPECT_EQ(classify_growth(s).cls, GrowthClass::Transient);
}

TEST(AnalyzerClassifier, NoisyGrowthIsUnbounded) {
    std::mt19937 rng(12345);
    std::uniform_real_distribution<double> u(0, 2);
    std::uniform_real_distribution<double> churn(0, 0.8);
    GrowthSeries s = empty_series();
    for (size_t w = 0; w < kWindows; ++w) {
        s.births_bytes[w] = 100000 * u(rng);
        s.deaths_bytes[w] = s.births_bytes[w] * churn(rng);  // short-lived part of the churn
        s.survivor_bytes[w] = s.births_bytes[w] - s.deaths_bytes[w];
    }
    GrowthVerdict v = classify_growth(s);
    EXPECT_EQ(v.cls, GrowthClass::Unbounded) << v.reason;
    EXPECT_GT(v.slope_bytes_per_s, 0);
}

TEST(AnalyzerClassifier, SmallGroupsAreStable) {
    GrowthSeries s = empty_series();
    for (size_t w = 0; w < kWindows; ++w) s.births_bytes[w] = s.survivor_bytes[w] = 100;
    EXPECT_EQ(classify_growth(s).cls, GrowthClass::Stable);
}

TEST(AnalyzerClassifier, CacheThatStopsGrowingWhileProgramWorksIsBounded) {
    // Grows linearly for the first half, then the program keeps working without inserting.
    GrowthSeries s = empty_series();
    for (size_t w = 0; w < kWindows / 2; ++w) s.births_bytes[w] = s.survivor_bytes[w] = 1e6;
    EXPECT_EQ(classify_growth(s).cls, GrowthClass::Bounded);
}

TEST(AnalyzerClassifier, TheilSenIgnoresOutliers) {
    std::vector<double> y;
    for (int i = 0; i < 50; ++i) y.push_back(3.0 * i);
    y[10] = 1e9;
    y[40] = -1e9;
    EXPECT_NEAR(theil_sen_slope(y), 3.0, 1e-9);
}

}  // namespace
}  // namespace growtrace
