// Decides, for one group of allocations (one stack), whether its retained memory grows for as
// long as the program works (unbounded), grows and then stops (bounded), comes and goes
// (transient), or is too small or too short-lived to judge (stable). A pure function of the
// group's births/deaths per window and of the birth times of its survivors; see
// docs/growth-classifier.md for the design. In a sampled trace the figures are estimates, and a
// group resting on too few samples is left undetermined instead of being guessed at.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace growtrace {

enum class GrowthClass { Unbounded, Bounded, Transient, Stable, Undetermined };

const char* growth_class_name(GrowthClass c);  // "unbounded", "bounded", ...

struct GrowthSeries {
    double window_s = 0;                // width of one window in seconds
    std::vector<double> births_bytes;   // per window
    std::vector<double> deaths_bytes;   // per window (same length)
    std::vector<double> survivor_bytes; // per window: bytes born then and still live at the end
    // Windows in which the program as a whole allocated or freed anything (inclusive range).
    // Growth is judged over the part of this span in which the group exists.
    size_t work_begin = 0;
    size_t work_end = 0;
    // Sampled traces: mean bytes between samples (0: every allocation was recorded, and the
    // figures are exact), the group's allocation records and those still live at the end.
    uint64_t sample_period = 0;
    uint64_t samples = 0;
    uint64_t live_samples = 0;
    // Allocation records that died, per window (same length as births_bytes, or empty): the
    // samples a group held before a teardown are its live ones plus those the teardown freed.
    std::vector<uint32_t> death_samples;
    // Windows of equal work (work_axis.h): each window's start and end time and the program's
    // allocations in it (same length as births_bytes). Empty: windows of window_s seconds
    // each, and no rate per allocation.
    std::vector<double> window_start_s, window_end_s, window_allocations;
    // Per window: the first and last time window with work it was cut from (work_axis.h).
    // History is counted in time windows: one busy time window cut into many is one.
    std::vector<uint32_t> window_first_time, window_last_time;
};

struct GrowthVerdict {
    GrowthClass cls = GrowthClass::Stable;
    // Growth of the retained bytes from the group's first window to the end of its active run
    // (before a teardown), per second, and per 1,000 allocations of the whole program (0: the
    // series has no work axis): what the group gains for a given amount of work, however fast
    // the work went.
    double slope_bytes_per_s = 0;
    double bytes_per_1k_allocations = 0;
    double started_at_s = 0;       // first window with a birth
    double plateau_at_s = 0;       // bounded: when retained bytes first reached 90% of the final
    double confidence = 0;         // 0..1
    double retained_end = 0;  // at the end of the series judged (before a teardown, if any)
    double retained_peak = 0;
    double growth_bytes = 0;  // retained_end less the level before the group's first window
    // A teardown (a mass free at the very end of the work, e.g. a clean-up call before main
    // returns): the group was judged on its series before it. When it began (0: none) and the
    // bytes it released.
    double teardown_at_s = 0;
    double released_at_teardown = 0;
    std::string reason;
};

// Below these a group is not worth a finding: allocator noise, small lazily built tables.
inline constexpr double kMinSignificantBytes = 64 * 1024;
// A group whose end level is below this share of its peak has given its memory back.
inline constexpr double kTransientRemainFraction = 0.25;
// A fill/empty cycle: the level falls to at most this share of the preceding local peak...
inline constexpr double kSawtoothDropFraction = 0.5;
// ...and at least this many such cycles make a sawtooth.
inline constexpr int kSawtoothMinCycles = 2;
// Only peaks of at least this share of the overall peak start a cycle (not a dip in the noise
// of a small level).
inline constexpr double kSawtoothMinPeakFraction = 0.5;
// Fewer windows of history than this, of the clock's or of the work's, cannot show a trend.
inline constexpr size_t kMinHistoryWindows = 8;
// Unbounded: every quarter of the active run must add at least this share of an even quarter
// (a plateau adds ~0 in its last quarters; noisy linear growth adds ~1). Before a teardown,
// where the survivors' ages are unknown, the lowest level of each quarter must rise by as
// much too (memory that comes and goes around a level returns near it in every quarter).
inline constexpr double kMinQuarterShare = 0.2;
// Unbounded: the robust slope over the last half must be at least this share of the whole-run
// slope (a cache still filling slows down; an unbounded one does not).
inline constexpr double kMinLateSlopeRatio = 0.35;
// Unbounded: survivors must be born in this share of the periods of the active run, each
// period holding at least kMinPeriodShare of an even share (a bounded cache's survivors are
// all young; a start-up table's are all old).
inline constexpr size_t kSurvivorPeriods = 8;
inline constexpr double kMinSurvivorPeriodFraction = 0.75;
inline constexpr double kMinPeriodShare = 0.25;

// Sampled traces: a verdict other than "small" needs this many samples in the group, and
// "unbounded" or "bounded" (which rest on the retained level and the ages of the survivors)
// this many live ones at the end; with fewer the group is Undetermined. The relative error of
// a sampled figure is about 1/sqrt(samples): 18 % at 32, and with 32 survivors spread over
// kSurvivorPeriods periods each period expects 4, so an empty one is rare (e^-4 = 2 %).
// Measured on synthetic sampled growth: tests/unit/analyzer_classifier_test.cpp.
inline constexpr uint64_t kMinSamplesToJudge = 32;
inline constexpr uint64_t kMinLiveSamplesToJudge = 32;

// A plateau is reached at the first window whose level is at least this share of the final one.
inline constexpr double kPlateauReachedFraction = 0.9;
// theil_sen_slope uses at most about this many points (their pairs are sorted).
inline constexpr size_t kMaxSlopePoints = 256;

// Confidence of an Unbounded verdict: the mean of four terms, each 1 for clean linear growth
// and falling as its evidence weakens: the weakest quarter's share and the late slope's ratio
// (each full at kConfidentShare of the whole-run rate), the share of periods with survivors,
// and the length of the history (full at kConfidentHistoryWindows windows).
inline constexpr double kConfidentShare = 0.8;
inline constexpr double kConfidentHistoryWindows = 32;
inline constexpr int kUnboundedConfidenceTerms = 4;
// Confidence of a Bounded verdict: at least kBoundedMinConfidence, rising to 1 as the late
// slope falls to nothing.
inline constexpr double kBoundedMinConfidence = 0.5;

// Teardown: a series whose end is below kTransientRemainFraction of its peak, that held at least
// kTeardownHeldFraction of the peak until it fell, in at most kTeardownFallShare of the time it
// had grown (a clean-up loop, however slow the tracer makes its frees), to below
// kTransientRemainFraction of that level within the last kTeardownShare of the run (or
// kTeardownMinWindows windows of a window series). Memory freed steadily during the run, in
// fill/empty cycles, or well before the work ends, is not a teardown.
inline constexpr double kTeardownHeldFraction = 0.5;
// Before a teardown, where the survivors' ages are unknown, what the group held at its peak must
// be at least this share of what it allocated until then: a table that fills keeps what it
// allocates (the growing stacks of test_programs/python/teardown_cache.py hold 23 % to 100 %
// of it), a queue or buffer drained at the end of the work hands nearly all of it on
// (handoff.py's queue, its consumer starved by a busy machine: 0.8 %).
inline constexpr double kMinTornDownHeldShare = 0.02;
inline constexpr double kTeardownFallShare = 0.5;
inline constexpr double kTeardownShare = 0.05;
inline constexpr size_t kTeardownMinWindows = 2;

// The index of the last point of `values` (at times `t`, ascending) before a teardown that ends
// the series, or -1 if it does not end in one. `begin` is the start of the run judged; `min_gap`
// the least time from that point to the end that is still "the very end".
std::ptrdiff_t teardown_point(const std::vector<double>& t, const std::vector<double>& values, double begin,
                              double min_gap);

GrowthVerdict classify_growth(const GrowthSeries& series);

// Whether an unbounded group is worth a user's action. A group that grows without bound but
// would add less than kSignificantBytesPerDay in a day at the pace measured, and is less than
// kSignificantHeapGrowthShare of what the whole heap gained while it grew, is reported among
// the groups, not as a finding: a service restarted daily would carry less than 64 MB of it,
// and something else explains most of its heap's growth. Either figure alone makes a finding:
// a slow grower that is most of a heap's growth is the thing to fix, and a fast one is worth
// fixing however much else grows beside it.
inline constexpr double kSignificantBytesPerDay = 64e6;
inline constexpr double kSignificantHeapGrowthShare = 0.10;
inline constexpr double kSecondsPerDay = 86400;

struct Significance {
    double projected_bytes_per_day = 0;  // the growth per second times a day
    double heap_growth_share = 0;        // the group's growth / the heap's, 0..1
    bool significant = true;
    std::string reason;  // why, in a sentence a report can print
};

// `heap_growth`: what the whole traced heap gained over the group's active run (at most
// 0: the heap did not grow, and the group is all of its growth).
Significance judge_significance(const GrowthVerdict& v, double heap_growth);

// Theil-Sen estimator: the median of the pairwise slopes of y over x = index (per window).
// Exposed for tests.
double theil_sen_slope(const std::vector<double>& y);

}  // namespace growtrace
