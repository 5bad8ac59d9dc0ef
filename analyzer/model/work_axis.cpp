#include "analyzer/model/work_axis.h"

#include <algorithm>
#include <cmath>

namespace growtrace {

namespace {

void add_window(WorkAxis& axis, double start_s, double end_s) {
    axis.start_s.push_back(start_s);
    axis.end_s.push_back(end_s);
    axis.allocations.push_back(0);
    axis.first_time.push_back(UINT32_MAX);
    axis.last_time.push_back(0);
}

// `worked`: time window t holds work (idle ones add no history to the window they join).
void give(WorkAxis& axis, size_t t, uint32_t window, double fraction, double allocations, bool worked = true) {
    axis.parts[t].push_back({window, fraction});
    axis.allocations[window] += allocations * fraction;
    if (!worked) return;
    axis.first_time[window] = std::min(axis.first_time[window], static_cast<uint32_t>(t));
    axis.last_time[window] = std::max(axis.last_time[window], static_cast<uint32_t>(t));
}

// Cuts time window t (of `events` events, from `begin_s` to `end_s`, the work before it
// `done`) at the multiples of `share`: each piece goes to its work window, whose start and end
// times are where the work crosses those multiples (events spread evenly over the window).
void cut_time_window(WorkAxis& axis, size_t t, double events, double allocations, double done, double share,
                     size_t windows, double begin_s, double end_s) {
    auto window_at = [&](double work) {
        return static_cast<uint32_t>(std::min<double>(static_cast<double>(windows - 1), std::floor(work / share)));
    };
    if (events <= 0) {
        const uint32_t w = window_at(done);
        give(axis, t, w, 1, allocations, false);
        axis.end_s[w] = std::max(axis.end_s[w], end_s);
        return;
    }
    const double seconds_per_event = (end_s - begin_s) / events;
    // Window by window from the one `done` falls in (not recomputed from `at`, which rounding
    // can leave a hair below a multiple of the share).
    const double end = done + events;
    double at = done;
    for (uint32_t w = window_at(done); at < end; ++w) {
        const double upto = w + 1 >= windows ? end : std::min(end, (w + 1) * share);
        if (upto <= at) continue;
        give(axis, t, w, (upto - at) / events, allocations);
        axis.end_s[w] = begin_s + (upto - done) * seconds_per_event;
        at = upto;
    }
}

}  // namespace

WorkAxis build_work_axis(const std::vector<double>& events, const std::vector<double>& allocations, double window_s,
                         size_t work_begin, size_t work_end) {
    WorkAxis axis;
    const size_t n = events.size();
    axis.parts.assign(n, {});
    if (n == 0) return axis;
    work_end = std::min(work_end, n - 1);
    work_begin = std::min(work_begin, work_end);
    auto alloc_at = [&](size_t t) { return t < allocations.size() ? allocations[t] : 0; };
    auto time_at = [&](size_t t) { return static_cast<double>(t) * window_s; };

    double total = 0;
    size_t busy = 0;
    for (size_t t = work_begin; t <= work_end; ++t) {
        total += events[t];
        if (events[t] > 0) ++busy;
    }
    const size_t windows = std::max<size_t>(1, busy);
    const double share = busy ? total / static_cast<double>(busy) : 1;
    // Each work window starts where the work before it reaches its multiple of the share.
    double done = 0;
    for (size_t k = 0; k < windows; ++k) add_window(axis, time_at(work_begin), time_at(work_begin + 1));
    for (size_t t = 0; t < work_begin; ++t) give(axis, t, 0, 1, alloc_at(t), false);
    for (size_t t = work_begin; t <= work_end; ++t) {
        cut_time_window(axis, t, events[t], alloc_at(t), done, share, windows, time_at(t), time_at(t + 1));
        done += events[t];
    }
    for (size_t k = 1; k < windows; ++k) axis.start_s[k] = axis.end_s[k - 1];
    axis.work_begin = 0;
    axis.work_end = windows - 1;
    for (size_t t = work_end + 1; t < n; ++t) {
        add_window(axis, time_at(t), time_at(t + 1));
        give(axis, t, static_cast<uint32_t>(axis.size() - 1), 1, alloc_at(t));
    }
    return axis;
}

double WorkClock::at(double seconds) const {
    if (before.empty() || window_s <= 0) return seconds;
    if (seconds <= 0) return 0;
    const double x = seconds / window_s;
    const auto t = static_cast<size_t>(x);
    if (t >= before.size()) return before.back() + in.back();
    return before[t] + in[t] * (x - static_cast<double>(t));
}

WorkClock build_work_clock(const std::vector<double>& allocations, double window_s) {
    WorkClock clock;
    clock.window_s = window_s;
    double done = 0;
    for (double a : allocations) {
        clock.before.push_back(done);
        clock.in.push_back(a);
        done += a;
    }
    return clock;
}

}  // namespace growtrace
