#include "report_view.h"

#include <fmt/core.h>

#include <cmath>

namespace growtrace::e2e {

namespace {

using nlohmann::json;

std::string basename_of(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

uint64_t number(const json& object, const char* key) {
    auto it = object.find(key);
    return it != object.end() && it->is_number() ? it->get<uint64_t>() : 0;
}

std::string text(const json& object, const char* key) {
    auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A finding or a group of `analyze --json` (analyzer/report/report_json.cpp).
StackView parse_stack(const json& entry, bool flagged) {
    StackView stack;
    stack.flagged = flagged;
    stack.classification = flagged ? "unbounded" : text(entry, "class");
    stack.live_bytes = number(entry, "retained_bytes");
    stack.live_count = number(entry, "live_allocations");
    stack.allocations = number(entry, "allocations");
    stack.live_samples = number(entry, "live_samples");
    if (auto se = entry.find("retained_bytes_stderr"); se != entry.end() && se->is_number())
        stack.live_bytes_stderr = se->get<double>();
    if (auto frames = entry.find("frames"); frames != entry.end() && frames->is_array()) {
        for (const json& f : *frames) {
            FrameView frame;
            frame.function = text(f, "function");
            frame.file = basename_of(text(f, "file"));
            frame.line = static_cast<int>(number(f, "line"));
            frame.module = basename_of(text(f, "module"));
            stack.frames.push_back(std::move(frame));
        }
    }
    return stack;
}

}  // namespace

bool function_is(const std::string& reported, const std::string& name) {
    for (size_t pos = reported.find(name); pos != std::string::npos; pos = reported.find(name, pos + 1)) {
        bool starts = pos == 0 || reported[pos - 1] == ':' || reported[pos - 1] == ' ';
        size_t end = pos + name.size();
        bool ends = end == reported.size() || reported[end] == '(' || reported[end] == '<' || reported[end] == ' ';
        if (starts && ends) return true;
    }
    return false;
}

Report::Report(const json& report) {
    if (!report.is_object()) {
        parse_error_ = "the report is not a JSON object";
        return;
    }
    // Findings are the unbounded groups; "groups" holds the other significant ones.
    if (auto findings = report.find("findings"); findings != report.end() && findings->is_array()) {
        for (const json& entry : *findings) findings_.push_back(parse_stack(entry, true));
    }
    stacks_ = findings_;
    if (auto groups = report.find("groups"); groups != report.end() && groups->is_array()) {
        for (const json& entry : *groups) stacks_.push_back(parse_stack(entry, false));
    }
    if (auto totals = report.find("totals"); totals != report.end() && totals->is_object()) totals_ = *totals;
    if (stacks_.empty()) parse_error_ = "the report lists no stacks";
}

std::optional<StackView> Report::stack_at(const std::string& function, const std::string& file, int line) const {
    std::optional<StackView> sum;
    for (const StackView& stack : stacks_) {
        for (const FrameView& frame : stack.frames) {
            if (!function_is(frame.function, function)) continue;
            if (!file.empty() && frame.file != file) continue;
            if (line >= 0 && frame.line != line) continue;
            if (!sum) {
                sum = StackView{};
                sum->module_basename = frame.module;
                sum->classification = stack.classification;
            }
            sum->frames = stack.frames;
            sum->flagged = sum->flagged || stack.flagged;
            sum->live_bytes += stack.live_bytes;
            sum->live_count += stack.live_count;
            sum->allocations += stack.allocations;
            sum->live_samples += stack.live_samples;
            sum->live_bytes_stderr = std::hypot(sum->live_bytes_stderr, stack.live_bytes_stderr);
            break;
        }
    }
    return sum;
}

std::optional<StackView> Report::stack_in(const std::string& function) const { return stack_at(function, "", -1); }

bool Report::is_flagged(const std::string& function) const {
    auto stack = stack_in(function);
    return stack && stack->flagged;
}

uint64_t Report::live_bytes_in(const std::string& function) const {
    auto stack = stack_in(function);
    return stack ? stack->live_bytes : 0;
}

uint64_t Report::allocations_in(const std::string& function) const {
    auto stack = stack_in(function);
    return stack ? stack->allocations : 0;
}

uint64_t Report::total(const std::string& key) const {
    return totals_.is_object() ? number(totals_, key.c_str()) : 0;
}

bool Report::findings_empty() const { return findings_.empty(); }

bool Report::finding_names(const std::string& function, const std::string& module_basename) const {
    for (const StackView& finding : findings_) {
        for (const FrameView& frame : finding.frames) {
            if (function_is(frame.function, function) && frame.module == module_basename) return true;
        }
    }
    return false;
}

std::string Report::summary() const {
    std::string out;
    if (!parse_error_.empty()) out += "(" + parse_error_ + ")\n";
    out += fmt::format("{} stacks, {} findings:\n", stacks_.size(), findings_.size());
    for (const StackView& stack : stacks_) {
        std::string where;
        for (const FrameView& frame : stack.frames) {
            if (frame.function.empty()) continue;
            where = fmt::format("{} {}:{} [{}]", frame.function, frame.file, frame.line, frame.module);
            if (!frame.file.empty() && frame.module.find("growtrace") == std::string::npos) break;
        }
        out += fmt::format("  {:>10} {:>12} live {:>8} live objects {:>8} allocations  {}\n",
                           stack.classification + (stack.flagged ? "*" : ""), stack.live_bytes,
                           stack.live_count, stack.allocations, where);
    }
    return out;
}

}  // namespace growtrace::e2e
