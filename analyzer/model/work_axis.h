// Windows of equal work instead of equal time, for judging growth.
//
// A cache that grows by one entry per request grows as fast as the program serves requests,
// whatever the clock says: a stalled process, a loaded machine or a quiet hour stretches the
// time between requests and, judged against time, makes growth look like a plateau (or a
// plateau look like growth when the work speeds up). The classifier therefore sees the run in
// windows that each hold about the same number of allocations of the whole program (bytes
// allocated in a sampled trace, analysis.cpp work_per_window): time
// windows with none join their neighbours (so a stall, or a clean-up loop that only frees,
// takes no room), busy ones are cut into several. Times (when growth
// started, when it plateaued) and the rate per second are still reported, read off the windows'
// start and end times. See docs/growth-classifier.md, "Work, not the clock".
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace growtrace {

struct WorkAxis {
    // What of time window t goes to which work window: a time window spans several work
    // windows when it holds more than a share of the work (its events are taken as spread
    // evenly over it); a time window without work goes whole to the one open at its time.
    struct Part {
        uint32_t window = 0;
        double fraction = 1;
    };
    std::vector<std::vector<Part>> parts;  // per time window
    std::vector<double> start_s, end_s;   // per work window
    std::vector<double> allocations;      // per work window, of the whole program
    // Per work window: the first and last time window with work it draws from. Windows cut
    // from one busy time window add no resolution the trace has: history is counted in these.
    std::vector<uint32_t> first_time, last_time;
    size_t work_begin = 0, work_end = 0;  // the work windows of the work span (inclusive)
    size_t size() const { return start_s.size(); }
};

// The work done by a time (the whole program's allocations, or bytes allocated in a sampled
// trace; analysis.cpp, work_per_window): for series that are not kept
// per window (a cache's entry counts, a class population), the times of their points are read
// as work done, and their quarters are quarters of the work.
struct WorkClock {
    double window_s = 0;
    std::vector<double> before;  // per time window: the allocations before it
    std::vector<double> in;      // per time window: its allocations, spread evenly over it
    // Allocations done by `seconds`; without windows, the seconds themselves.
    double at(double seconds) const;
};

WorkClock build_work_clock(const std::vector<double>& allocations, double window_s);

// `events[t]` (the work: allocations, or in a sampled trace bytes allocated) and
// `allocations[t]` per time window t of `window_s` seconds; the program worked
// from time window `work_begin` to `work_end` (inclusive). The work span is cut into as many
// windows of equal work as it has time windows with any work; windows before the span join
// the first work window, those after it (the shutdown's collection) stay one work window each.
WorkAxis build_work_axis(const std::vector<double>& events, const std::vector<double>& allocations, double window_s,
                         size_t work_begin, size_t work_end);

}  // namespace growtrace
