// How trace files are named, for every part that makes or looks for one: the preload library
// names the traces of forked children and exec'd images after the trace it was given, and
// `growtrace run` / `attach` / `report` and the analyzer find and name them the same way.
//
//   growtrace.<pid>.gtrace             a process traced without a path
//   <stem>.<pid>.gtrace                a child forked by the process that writes <stem>.gtrace
//   <stem>.<pid>.<n>.gtrace            the same when that name was taken (n = 2, 3, ...)
//   <stem>.exec<n>.gtrace              an image the process exec'd (n = 1, 2, ... the first free);
//                                      the image <stem>.exec<n> execs is <stem>.exec<n+1> (one
//                                      exec chain, one numbering), a forked child's <stem>.<pid>.exec1
//   growtrace.<pid>.attach[<n>].gtrace `growtrace attach PID` without a path (n = 2, 3, ...)
//
// The functions that write a name write it into a caller's buffer with snprintf (the preload
// library cannot allocate there) and return false when it does not fit.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace growtrace::trace_names {

inline constexpr char kExtension[] = ".gtrace";
inline constexpr std::string_view kExtensionView{kExtension};

// `path` without a trailing ".gtrace": what the names of its derived traces start with.
constexpr std::string_view stem(std::string_view path) {
    return path.ends_with(kExtensionView) ? path.substr(0, path.size() - kExtensionView.size()) : path;
}

namespace detail {
inline bool written(int n, size_t size) { return n > 0 && static_cast<size_t>(n) < size; }
inline int length(std::string_view s) { return static_cast<int>(s.size()); }
}  // namespace detail

// <stem>.<pid>.gtrace for the first attempt, <stem>.<pid>.<attempt>.gtrace after.
inline bool forked_child(std::string_view primary, int pid, int attempt, char* out, size_t size) {
    std::string_view s = stem(primary);
    int n = attempt <= 1 ? snprintf(out, size, "%.*s.%d%s", detail::length(s), s.data(), pid, kExtension)
                         : snprintf(out, size, "%.*s.%d.%d%s", detail::length(s), s.data(), pid, attempt, kExtension);
    return detail::written(n, size);
}

// <stem>.exec<n>.gtrace
inline bool exec_image(std::string_view primary, int n, char* out, size_t size) {
    std::string_view s = stem(primary);
    return detail::written(snprintf(out, size, "%.*s.exec%d%s", detail::length(s), s.data(), n, kExtension), size);
}

// Where `own` (the trace of the process about to exec) sits in its exec chain: the chain's stem
// and the image's number in it (0 for the first image, n for <chain>.exec<n>.gtrace).
struct ChainPosition {
    std::string_view chain;
    int index = 0;
};
constexpr ChainPosition chain_position(std::string_view own) {
    std::string_view s = stem(own);
    size_t dot = s.rfind('.');
    if (dot == std::string_view::npos) return {s, 0};
    std::string_view last = s.substr(dot + 1);
    if (!last.starts_with("exec") || last.size() == 4 || last.size() > 13) return {s, 0};
    int index = 0;
    for (char c : last.substr(4)) {
        if (c < '0' || c > '9') return {s, 0};
        index = index * 10 + (c - '0');
    }
    return index > 0 ? ChainPosition{s.substr(0, dot), index} : ChainPosition{s, 0};
}

// The trace of the image `own`'s process execs, `step` places on (1 = the next; a caller whose
// name is taken tries 2, 3...): <chain>.exec<index + step>.gtrace.
inline bool next_exec_image(std::string_view own, int step, char* out, size_t size) {
    ChainPosition at = chain_position(own);
    return exec_image(at.chain, at.index + step, out, size);
}

// growtrace.<pid>.gtrace, relative: in the directory the process starts in.
inline bool unnamed(int pid, char* out, size_t size) {
    return detail::written(snprintf(out, size, "growtrace.%d%s", pid, kExtension), size);
}

// growtrace.<pid>.attach.gtrace for the first attempt, growtrace.<pid>.attach<attempt>.gtrace after.
inline bool attached(int pid, int attempt, char* out, size_t size) {
    int n = attempt <= 1 ? snprintf(out, size, "growtrace.%d.attach%s", pid, kExtension)
                         : snprintf(out, size, "growtrace.%d.attach%d%s", pid, attempt, kExtension);
    return detail::written(n, size);
}

// What a file beside the trace `primary_name` (both file names, no directory) is to it.
enum class Relation { None, ForkedChild, ExecImage };
constexpr Relation relation(std::string_view name, std::string_view primary_name) {
    std::string_view s = stem(primary_name);
    if (name == primary_name || !name.ends_with(kExtensionView) || name.size() <= s.size() + 1 + kExtensionView.size() ||
        !name.starts_with(s) || name[s.size()] != '.')
        return Relation::None;
    std::string_view middle = name.substr(s.size() + 1, name.size() - s.size() - 1 - kExtensionView.size());
    // An exec'd image's own children (<stem>.exec1.<pid>.gtrace) are processes it forked.
    return middle.starts_with("exec") && middle.find('.') == std::string_view::npos ? Relation::ExecImage
                                                                                      : Relation::ForkedChild;
}

// The same names as std::string ("" if longer than a path can be), for the command and the
// analyzer (never the preload library, which must not allocate).
namespace detail {
template <typename Write>
std::string to_string(Write write) {
    char buffer[4096];
    return write(buffer, sizeof buffer) ? std::string(buffer) : std::string();
}
}  // namespace detail
inline std::string forked_child(std::string_view primary, int pid, int attempt = 1) {
    return detail::to_string([&](char* out, size_t size) { return forked_child(primary, pid, attempt, out, size); });
}
inline std::string next_exec_image(std::string_view own, int step = 1) {
    return detail::to_string([&](char* out, size_t size) { return next_exec_image(own, step, out, size); });
}
inline std::string unnamed(int pid) {
    return detail::to_string([&](char* out, size_t size) { return unnamed(pid, out, size); });
}
inline std::string attached(int pid, int attempt = 1) {
    return detail::to_string([&](char* out, size_t size) { return attached(pid, attempt, out, size); });
}

}  // namespace growtrace::trace_names
