// Two analyses compared root cause by root cause: the question after a fix is "is the growth
// gone?". Works on the JSON analysis (report_json.h), so that a saved `analyze --json` of an
// old run can be compared with a new trace. A root cause is recognised across runs by what it
// names (the cache, the class name, or the functions of the stack), not by line numbers, which
// change between versions of the code.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace growtrace {

inline constexpr int kDiffFormatVersion = 1;

// A growth rate this many times the other's is "faster" (or its inverse "slower").
inline constexpr double kRateChangeFactor = 1.5;

// {"format_version", "before": {...}, "after": {...}, "root_causes": [{"status": "gone" |
// "still_growing" | "new", "change": "faster" | "slower" | "same" | null, "key", "kind",
// "title", "before": figures | null, "after": figures | null}]}, "new" first, then
// "still_growing", then "gone". Throws std::invalid_argument when an input has no root causes
// (an analysis written by a growtrace that did not make them).
nlohmann::json diff_analyses(const nlohmann::json& before, const nlohmann::json& after);

// True when the diff has a root cause that grows after and did not before.
bool diff_has_new_growth(const nlohmann::json& diff);

void write_diff_text(const nlohmann::json& diff, std::ostream& out);

// The identity of a root cause of a JSON analysis across runs.
std::string root_cause_key(const nlohmann::json& analysis, const nlohmann::json& root_cause);

}  // namespace growtrace
