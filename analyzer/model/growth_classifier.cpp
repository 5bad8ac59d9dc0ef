#include "analyzer/model/growth_classifier.h"

#include "analyzer/model/units.h"

#include <algorithm>
#include <cstdint>
#include <cmath>

#include <fmt/format.h>

namespace growtrace {

const char* growth_class_name(GrowthClass c) {
    switch (c) {
        case GrowthClass::Unbounded: return "unbounded";
        case GrowthClass::Bounded: return "bounded";
        case GrowthClass::Transient: return "transient";
        case GrowthClass::Stable: return "stable";
        case GrowthClass::Undetermined: return "undetermined";
    }
    return "stable";
}

double theil_sen_slope(const std::vector<double>& y) {
    const size_t n = y.size();
    if (n < 2) return 0;
    // At most about kMaxSlopePoints points are used so the pair count stays small.
    const size_t stride = std::max<size_t>(1, n / kMaxSlopePoints);
    std::vector<double> slopes;
    for (size_t i = 0; i < n; i += stride)
        for (size_t j = i + stride; j < n; j += stride)
            slopes.push_back((y[j] - y[i]) / static_cast<double>(j - i));
    if (slopes.empty()) return 0;
    auto mid = slopes.begin() + static_cast<std::ptrdiff_t>(slopes.size() / 2);
    std::nth_element(slopes.begin(), mid, slopes.end());
    return *mid;
}

std::ptrdiff_t teardown_point(const std::vector<double>& t, const std::vector<double>& values, double begin,
                              double min_gap) {
    if (values.size() < 2 || t.size() != values.size()) return -1;
    const double peak = *std::max_element(values.begin(), values.end());
    if (peak <= 0 || values.back() >= kTransientRemainFraction * peak) return -1;
    size_t held = values.size() - 1;
    while (held > 0 && values[held] < kTeardownHeldFraction * peak) --held;
    if (values[held] < kTeardownHeldFraction * peak) return -1;
    // Back to where the fall began: a clean-up loop takes a while under the tracer.
    while (held > 0 && values[held - 1] >= values[held]) --held;
    size_t low = held + 1;  // where the fall is complete
    while (low < values.size() && values[low] > kTransientRemainFraction * values[held]) ++low;
    if (low >= values.size()) return -1;
    const double end = t.back();
    const bool at_the_end = end - t[low] <= std::max(min_gap, kTeardownShare * (end - begin));
    const bool abrupt = t[low] - t[held] <= std::max(min_gap, kTeardownFallShare * (t[held] - begin));
    return at_the_end && abrupt ? static_cast<std::ptrdiff_t>(held) : -1;
}

namespace {

// Number of times the level fell to kSawtoothDropFraction of a preceding peak that was itself
// at least kSawtoothMinPeakFraction of the overall peak.
int count_fill_empty_cycles(const std::vector<double>& level, double peak) {
    int cycles = 0;
    double local_peak = 0;
    for (double v : level) {
        local_peak = std::max(local_peak, v);
        if (local_peak >= kSawtoothMinPeakFraction * peak && v <= kSawtoothDropFraction * local_peak) {
            ++cycles;
            local_peak = v;
        }
    }
    return cycles;
}

struct Span {
    size_t first = 0;  // first window of the group's active run
    size_t last = 0;   // last window (inclusive)
    size_t size() const { return last - first + 1; }
    // Window index where part k of `parts` starts.
    size_t part_start(size_t k, size_t parts) const { return first + size() * k / parts; }
};

double level_before(const std::vector<double>& level, size_t w) { return w == 0 ? 0 : level[w - 1]; }

// The smallest growth of a quarter of the span as a share of an even quarter of the total.
double min_quarter_share(const std::vector<double>& level, const Span& span, double total) {
    double min_share = INFINITY;
    for (size_t q = 0; q < 4; ++q) {
        const size_t a = span.part_start(q, 4), b = span.part_start(q + 1, 4);
        if (b <= a) continue;
        const double growth = level[b - 1] - level_before(level, a);
        min_share = std::min(min_share, growth / (total / 4));
    }
    return min_share;
}

// Periods (of kSurvivorPeriods) whose survivors hold at least kMinPeriodShare of an even share.
size_t periods_with_survivors(const std::vector<double>& survivors, const Span& span, size_t periods) {
    double total = 0;
    for (size_t w = span.first; w <= span.last; ++w) total += survivors[w];
    if (total <= 0) return 0;
    size_t count = 0;
    for (size_t p = 0; p < periods; ++p) {
        double sum = 0;
        for (size_t w = span.part_start(p, periods); w < span.part_start(p + 1, periods); ++w) sum += survivors[w];
        if (sum >= kMinPeriodShare * total / static_cast<double>(periods)) ++count;
    }
    return count;
}

// The lowest level of each later quarter rises over the one before by this share of an even
// quarter of `total`, at the least.
double min_floor_rise_share(const std::vector<double>& level, const Span& span, double total) {
    double min_share = INFINITY, previous = NAN;
    for (size_t q = 0; q < 4; ++q) {
        const size_t a = span.part_start(q, 4), b = span.part_start(q + 1, 4);
        if (b <= a) continue;
        const double floor = *std::min_element(level.begin() + static_cast<std::ptrdiff_t>(a),
                                               level.begin() + static_cast<std::ptrdiff_t>(b));
        if (!std::isnan(previous)) min_share = std::min(min_share, (floor - previous) / (total / 4));
        previous = floor;
    }
    return min_share;
}

double start_of(const GrowthSeries& s, size_t w) {
    return w < s.window_start_s.size() ? s.window_start_s[w] : static_cast<double>(w) * s.window_s;
}

double end_of(const GrowthSeries& s, size_t w) {
    return w < s.window_end_s.size() ? s.window_end_s[w] : static_cast<double>(w + 1) * s.window_s;
}

double plateau_time(const std::vector<double>& level, double target, const GrowthSeries& s) {
    for (size_t w = 0; w < level.size(); ++w)
        if (level[w] >= kPlateauReachedFraction * target) return end_of(s, w);
    return level.empty() ? 0 : end_of(s, level.size() - 1);
}

// How many time windows with work the span draws from (its windows, on a time axis).
size_t history_of(const GrowthSeries& s, const Span& span) {
    if (span.last >= s.window_last_time.size() || span.first >= s.window_first_time.size()) return span.size();
    uint32_t first = UINT32_MAX, last = 0;
    for (size_t w = span.first; w <= span.last; ++w) {
        if (s.window_first_time[w] == UINT32_MAX) continue;  // idle time only
        first = std::min(first, s.window_first_time[w]);
        last = std::max(last, s.window_last_time[w]);
    }
    return first == UINT32_MAX ? 0 : last - first + 1;
}

// Converts a slope per window of the span into one per second and per 1,000 allocations.
struct Rates {
    double per_window_to_per_s = 0;
    double per_window_to_per_1k_allocations = 0;
};

Rates rates_over(const GrowthSeries& s, const Span& span) {
    Rates r;
    const double windows = static_cast<double>(span.size());
    const double seconds = end_of(s, span.last) - start_of(s, span.first);
    r.per_window_to_per_s = seconds > 0 ? windows / seconds : (s.window_s > 0 ? 1 / s.window_s : 0);
    double allocations = 0;
    for (size_t w = span.first; w <= span.last && w < s.window_allocations.size(); ++w)
        allocations += s.window_allocations[w];
    r.per_window_to_per_1k_allocations = allocations > 0 ? 1000 * windows / allocations : 0;
    return r;
}

GrowthVerdict classify_levels(const GrowthSeries& s);

}  // namespace

GrowthVerdict classify_growth(const GrowthSeries& s) {
    GrowthVerdict v = classify_levels(s);
    if (!s.sample_period || v.cls == GrowthClass::Stable) return v;
    const bool needs_survivors = v.cls == GrowthClass::Unbounded || v.cls == GrowthClass::Bounded;
    // Judged before a teardown: the samples live then, not after it.
    uint64_t live_samples = s.live_samples;
    if (v.teardown_at_s > 0)
        for (size_t w = 0; w < s.death_samples.size(); ++w)
            if (start_of(s, w) >= v.teardown_at_s * (1 - 1e-12)) live_samples += s.death_samples[w];
    std::string thin;
    if (s.samples < kMinSamplesToJudge)
        thin = fmt::format("{} sample{}, at least {} needed", s.samples, s.samples == 1 ? "" : "s", kMinSamplesToJudge);
    else if (needs_survivors && live_samples < kMinLiveSamplesToJudge)
        thin = fmt::format("{} live sample{} {}, at least {} needed", live_samples, live_samples == 1 ? "" : "s",
                           v.teardown_at_s > 0 ? "before the teardown" : "at the end", kMinLiveSamplesToJudge);
    if (thin.empty()) return v;
    v.reason = fmt::format("too thinly sampled to judge ({}; one sample per {} allocated); the figures alone "
                           "would say {}: {}",
                           thin, human_bytes(static_cast<double>(s.sample_period)), growth_class_name(v.cls), v.reason);
    v.cls = GrowthClass::Undetermined;
    v.confidence = 0;
    return v;
}

namespace {

// The level held at the end of each window (births minus deaths so far); sets the verdict's
// peak and end.
std::vector<double> levels_of(const GrowthSeries& s, GrowthVerdict& v) {
    const size_t n = s.births_bytes.size();
    std::vector<double> level(n);
    double acc = 0;
    for (size_t w = 0; w < n; ++w) {
        acc += s.births_bytes[w] - (w < s.deaths_bytes.size() ? s.deaths_bytes[w] : 0);
        level[w] = acc;
        v.retained_peak = std::max(v.retained_peak, acc);
    }
    v.retained_end = n ? level[n - 1] : 0;
    return level;
}

// A teardown at the very end of the work: the group is judged on what came before it, so the
// span and the levels end where the final fall begins. The memory freed then was born when it
// was, but the trace does not say when: the survivors test is left out. True when cut.
bool cut_at_teardown(const GrowthSeries& s, std::vector<double>& level, Span& span, GrowthVerdict& v) {
    std::vector<double> t(span.size()), held(span.size());
    for (size_t w = span.first; w <= span.last; ++w) {
        t[w - span.first] = static_cast<double>(w);
        held[w - span.first] = level[w];
    }
    const std::ptrdiff_t before =
        teardown_point(t, held, static_cast<double>(span.first), static_cast<double>(kTeardownMinWindows));
    if (before < 0 || held[static_cast<size_t>(before)] < kMinSignificantBytes) return false;
    const size_t last_held = span.first + static_cast<size_t>(before);
    v.teardown_at_s = end_of(s, last_held);
    v.released_at_teardown = level[last_held] - level[span.last];
    span.last = last_held;
    level.resize(last_held + 1);
    v.retained_end = level.back();
    return true;
}

// The verdicts that need no trend: small, freed, churning. True when one was given.
bool judged_without_trend(const std::vector<double>& level, GrowthVerdict& v) {
    if (v.retained_peak < kMinSignificantBytes) {
        v.cls = GrowthClass::Stable;
        v.reason = fmt::format("small: peak {}", human_bytes(v.retained_peak));
        return true;
    }
    if (v.retained_end < kTransientRemainFraction * v.retained_peak) {
        v.cls = GrowthClass::Transient;
        v.confidence = 1 - v.retained_end / v.retained_peak;
        v.reason = fmt::format("freed: {} of a peak of {} remain at the end", human_bytes(v.retained_end),
                               human_bytes(v.retained_peak));
        return true;
    }
    const int cycles = count_fill_empty_cycles(level, v.retained_peak);
    if (cycles >= kSawtoothMinCycles) {
        v.cls = GrowthClass::Transient;
        v.confidence = std::min(1.0, cycles / 4.0);
        v.reason = fmt::format("churns: filled and emptied {} times (peak {})", cycles, human_bytes(v.retained_peak));
        return true;
    }
    return false;
}

// A trend needs enough points on both axes: moments of the program's life (a burst of work cut
// into many windows is a few moments), and windows of its work (a step just before the program
// goes idle spans seconds of the clock but two or three windows of work, on which the quarters
// and the late half are a window or none each). True when there are too few: then Stable.
bool too_little_history(size_t history, const Span& span, GrowthVerdict& v) {
    if (history < kMinHistoryWindows) {
        v.cls = GrowthClass::Stable;
        v.reason = fmt::format("active in only {} windows of the run: too little history to judge", history);
        return true;
    }
    if (span.size() < kMinHistoryWindows) {
        v.cls = GrowthClass::Stable;
        v.reason = fmt::format("active in only the last {} of the program's windows of work: too little history to "
                               "judge",
                               span.size());
        return true;
    }
    return false;
}

// What the group held at its peak in the span, as a share of the bytes it allocated there.
double peak_held_share(const GrowthSeries& s, const std::vector<double>& active, const Span& span) {
    double allocated = 0;
    for (size_t w = span.first; w <= span.last && w < s.births_bytes.size(); ++w) allocated += s.births_bytes[w];
    const double peak = active.empty() ? 0 : *std::max_element(active.begin(), active.end());
    return allocated > 0 ? peak / allocated : 1;
}

// Unbounded when every check passes, else Bounded with the first check that failed as the
// reason. Slopes are robust slopes per window of work.
void judge_trend(const GrowthSeries& s, const std::vector<double>& level, const Span& span, bool torn_down,
                 size_t history, const Rates& rates, GrowthVerdict& v) {
    const std::vector<double> active(level.begin() + static_cast<std::ptrdiff_t>(span.first),
                                     level.begin() + static_cast<std::ptrdiff_t>(span.last) + 1);
    const double growth = v.retained_end - level_before(level, span.first);
    const double quarter_share = growth > 0 ? min_quarter_share(level, span, growth) : 0;
    const std::vector<double> late(active.begin() + static_cast<std::ptrdiff_t>(active.size() / 2), active.end());
    const double late_slope = theil_sen_slope(late);  // per window, as avg_slope
    const double avg_slope = growth / static_cast<double>(span.size());
    const double late_ratio = avg_slope > 0 ? late_slope / avg_slope : 0;
    const size_t periods = std::min(kSurvivorPeriods, span.size());
    const size_t survivor_periods = periods_with_survivors(s.survivor_bytes, span, periods);
    const double held = torn_down ? peak_held_share(s, active, span) : 1;

    std::string failed;
    if (growth < kMinSignificantBytes)
        failed = fmt::format("grew only {} while active", human_bytes(growth));
    else if (late_slope <= 0 || late_ratio < kMinLateSlopeRatio)
        failed = fmt::format("plateaued at {:.1f} s: slope over the last half {}/s vs {}/s overall",
                             v.plateau_at_s, human_bytes(late_slope * rates.per_window_to_per_s),
                             human_bytes(avg_slope * rates.per_window_to_per_s));
    else if (quarter_share < kMinQuarterShare)
        failed = fmt::format("growth stalls: one quarter of the run adds only {:.0f}% of an even share",
                             100 * std::max(0.0, quarter_share));
    else if (held < kMinTornDownHeldShare)
        failed = fmt::format("turnover: at its peak it held only {:.1f}% of what it allocated before the teardown (a "
                             "queue or buffer drained at the end, not a table that fills)",
                             100 * held);
    else if (torn_down && min_floor_rise_share(level, span, growth) < kMinQuarterShare)
        failed = fmt::format("comes and goes: its lowest level rises by only {:.0f}% of an even share from one "
                             "quarter of the run to the next before the teardown",
                             100 * std::max(0.0, min_floor_rise_share(level, span, growth)));
    else if (!torn_down &&
             static_cast<double>(survivor_periods) < kMinSurvivorPeriodFraction * static_cast<double>(periods))
        failed = fmt::format("survivors born in only {} of {} periods (turnover, not accumulation)",
                             survivor_periods, periods);

    if (!failed.empty()) {
        v.cls = GrowthClass::Bounded;
        v.confidence = kBoundedMinConfidence + (1 - kBoundedMinConfidence) * std::clamp(1 - late_ratio, 0.0, 1.0);
        v.reason = failed;
        return;
    }
    v.cls = GrowthClass::Unbounded;
    const double c_quarters = std::min(1.0, quarter_share / kConfidentShare);
    const double c_late = std::min(1.0, late_ratio / kConfidentShare);
    const double c_survivors = torn_down ? 1.0 : static_cast<double>(survivor_periods) / static_cast<double>(periods);
    const double c_history = std::min(1.0, static_cast<double>(history) / kConfidentHistoryWindows);
    v.confidence = std::clamp((c_quarters + c_late + c_survivors + c_history) / kUnboundedConfidenceTerms, 0.0, 1.0);
    v.reason = torn_down ? fmt::format("grew in every quarter of the run until a teardown at {:.2f} s released {}",
                                       v.teardown_at_s, human_bytes(v.released_at_teardown))
                         : fmt::format("grew in every quarter of the run; survivors born in {} of {} periods",
                                       survivor_periods, periods);
}

GrowthVerdict classify_levels(const GrowthSeries& s) {
    GrowthVerdict v;
    std::vector<double> level = levels_of(s, v);
    const size_t n = level.size();
    auto first_birth = std::find_if(s.births_bytes.begin(), s.births_bytes.end(), [](double b) { return b > 0; });
    if (first_birth == s.births_bytes.end()) {
        v.reason = "no allocations";
        return v;
    }
    Span span;
    span.first = static_cast<size_t>(first_birth - s.births_bytes.begin());
    span.last = (s.work_end >= span.first && s.work_end < n) ? s.work_end : n - 1;
    v.started_at_s = start_of(s, span.first);
    const bool torn_down = cut_at_teardown(s, level, span, v);
    if (judged_without_trend(level, v)) return v;

    // The rates a user reads are the span's average growth, per second and per allocation.
    const Rates rates = rates_over(s, span);
    v.growth_bytes = v.retained_end - level_before(level, span.first);
    const double mean_slope = v.growth_bytes / static_cast<double>(span.size());
    v.slope_bytes_per_s = mean_slope * rates.per_window_to_per_s;
    v.bytes_per_1k_allocations = mean_slope * rates.per_window_to_per_1k_allocations;
    v.plateau_at_s = plateau_time(level, v.retained_end, s);

    const size_t history = history_of(s, span);
    if (too_little_history(history, span, v)) return v;
    judge_trend(s, level, span, torn_down, history, rates, v);
    return v;
}

}  // namespace

Significance judge_significance(const GrowthVerdict& v, double heap_growth) {
    Significance out;
    out.projected_bytes_per_day = std::max(0.0, v.slope_bytes_per_s) * kSecondsPerDay;
    out.heap_growth_share = heap_growth > 0 ? std::clamp(v.growth_bytes / heap_growth, 0.0, 1.0) : 1.0;
    out.significant = out.projected_bytes_per_day >= kSignificantBytesPerDay ||
                      out.heap_growth_share >= kSignificantHeapGrowthShare;
    out.reason = fmt::format("{} a day at this pace, {:.0f}% of the heap's growth while it grew{}",
                             human_bytes(out.projected_bytes_per_day), 100 * out.heap_growth_share,
                             out.significant ? ""
                                             : fmt::format(": minor (a finding needs {} a day or {:.0f}% of the heap's growth)",
                                                           human_bytes(kSignificantBytesPerDay),
                                                           100 * kSignificantHeapGrowthShare));
    return out;
}

}  // namespace growtrace
