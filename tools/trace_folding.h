// After `growtrace run`: an exec chain is one program, and the short-lived helpers around it
// leave no traces behind.
//
//  - The main trace's exec chain (a pyenv shim: env, bash, env, bash... then python) is followed
//    through its Exec records to the program at its end. When every launcher before it is a
//    helper (below), their traces are removed and the program's trace takes the main trace's
//    name: the file -o named holds the program. Its Process record names the launchers
//    (analyzer/analysis/program_chain.h). Otherwise they stay, and analyze follows the chain.
//  - The other traces of the run that are helpers are removed too when they are a launcher's
//    (what its forks ran, and its subshells: forks that did not exec and whose heap stayed
//    below kMaxSubshellPeakBytes) or ran another program (a fork that exec'd, an exec'd image,
//    a spawned one: `uname`, `sh -c`...). A forked worker keeps its trace, as does every trace
//    that is not a helper.
//  - A helper: a trace of at most kMaxHelperTraceBytes whose analysis has no finding and whose
//    traced heap never exceeded kMaxHelperPeakBytes: it allocated little (bash running pyenv
//    peaks near 200 KB, a CPython interpreter starting near 7 MB).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace growtrace::cli {

inline constexpr uint64_t kMaxHelperTraceBytes = 1 << 20;
inline constexpr double kMaxHelperPeakBytes = 1 << 20;
inline constexpr double kMaxSubshellPeakBytes = 64 * 1024;  // bash's: below 7 KB

struct FoldedTraces {
    std::string program_trace;          // the trace to report on: the main one, or the program's renamed to it
    std::vector<std::string> launchers; // the launchers' program names, in order (empty: no exec chain)
    std::string program;                // the program at the end of the chain (its executable)
    bool chain_folded = false;          // the launchers' traces were removed, the program's renamed
    size_t helper_processes = 0;        // processes besides the program whose traces were removed
    size_t removed_traces = 0;          // every trace removed, the launchers' included
    std::vector<std::string> kept;      // the other traces, still there
};

// `main` is the run's main trace, `others` the other traces the run wrote. Removes and renames
// files as above; `fold` false only works out the chain (nothing is removed).
FoldedTraces fold_traces(const std::string& main, const std::vector<std::string>& others, bool fold);

// The one line that says what was folded ("" when nothing was).
std::string folding_summary(const FoldedTraces& folded);

}  // namespace growtrace::cli
