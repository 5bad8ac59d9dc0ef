#include "trace_folding.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "analyzer/analysis/analysis.h"
#include "analyzer/analysis/program_chain.h"
#include "analyzer/read/trace_error.h"
#include "contracts/trace_names.h"

namespace growtrace::cli {

namespace {

namespace fs = std::filesystem;

std::string identity(const std::string& path) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(path, ec);
    return ec ? path : canonical.string();
}

// What folding needs to know of one trace.
struct TraceFacts {
    bool analysed = false;  // small enough, and readable
    bool helper = false;    // no finding, heap below kMaxHelperPeakBytes
    bool subshell = false;  // no finding, heap below kMaxSubshellPeakBytes
    uint64_t pid = 0;
    std::string exe;
    std::vector<std::string> argv;
    std::string exec_successor;         // identity of the exec'd image's trace, if it is there
    std::vector<std::string> forked;    // identities of forked children's traces that are there
};

class Family {
public:
    const TraceFacts& facts(const std::string& path) {
        std::string id = identity(path);
        auto it = facts_.find(id);
        if (it != facts_.end()) return it->second;
        TraceFacts f;
        std::error_code ec;
        auto size = fs::file_size(path, ec);
        if (!ec && size <= kMaxHelperTraceBytes) {
            try {
                AnalysisResult r = analyze_trace(path);
                f.analysed = true;
                f.helper = finding_count(r) == 0 && r.totals.peak_bytes <= kMaxHelperPeakBytes;
                f.subshell = finding_count(r) == 0 && r.totals.peak_bytes <= kMaxSubshellPeakBytes;
                f.pid = r.pid;
                f.exe = r.exe;
                f.argv = r.argv;
                std::string next = exec_successor(r, path);
                if (!next.empty()) f.exec_successor = identity(next);
                for (const ChildTrace& child : r.children) {
                    if (child.kind != "fork" || child.path.empty()) continue;
                    std::string where = child.path;
                    if (!fs::is_regular_file(where, ec)) where = (fs::path(path).parent_path() / fs::path(child.path).filename()).string();
                    if (fs::is_regular_file(where, ec)) f.forked.push_back(identity(where));
                }
            } catch (const TraceError&) {
            } catch (const std::bad_alloc&) {
            }
        }
        return facts_.emplace(id, std::move(f)).first->second;
    }

private:
    std::map<std::string, TraceFacts> facts_;
};

// <stem>.exec<N>.gtrace: the trace of an image started by exec (or spawned past the hooks).
bool named_as_exec_image(const std::string& path) {
    return trace_names::chain_position(fs::path(path).filename().string()).index > 0;
}

}  // namespace

FoldedTraces fold_traces(const std::string& main, const std::vector<std::string>& others, bool fold) {
    FoldedTraces out;
    out.program_trace = main;
    // One trace: no chain, no helper. Deciding that needs no analysis of it (which would cost a
    // small program's run a few hundred milliseconds at its end).
    if (others.empty()) return out;
    Family family;
    std::map<std::string, std::string> by_identity;  // identity -> path as given
    for (const std::string& p : others) by_identity[identity(p)] = p;

    // The main chain: main, then each exec'd image, while the traces are helpers' size.
    std::vector<std::string> chain{identity(main)};
    std::set<std::string> in_chain{chain.front()};
    while (true) {
        const TraceFacts& f = family.facts(chain.back());
        if (!f.analysed || f.exec_successor.empty() || !by_identity.contains(f.exec_successor) ||
            !in_chain.insert(f.exec_successor).second)
            break;
        chain.push_back(f.exec_successor);
    }
    for (size_t i = 0; i + 1 < chain.size(); ++i) {
        const TraceFacts& f = family.facts(chain[i]);
        out.launchers.push_back(describe_launcher(ProgramImage{f.exe, f.argv}));
    }
    if (chain.size() > 1) {
        // Its Process record: the program's trace may be too large to have been analysed here.
        try {
            out.program = read_program_chain(by_identity[chain.back()]).program.exe;
        } catch (const TraceError&) {
        }
        if (out.program.empty()) out.program = fs::path(by_identity[chain.back()]).filename().string();
    }

    bool launchers_are_helpers = chain.size() > 1;
    for (size_t i = 0; i + 1 < chain.size(); ++i) launchers_are_helpers &= family.facts(chain[i]).helper;

    std::set<std::string> removed;
    if (fold && launchers_are_helpers) {
        // The launchers, and whatever they forked, down, as long as it is helpers.
        std::vector<std::string> pending;
        for (size_t i = 0; i + 1 < chain.size(); ++i) {
            removed.insert(chain[i]);
            for (const std::string& child : family.facts(chain[i]).forked) pending.push_back(child);
        }
        while (!pending.empty()) {
            std::string id = pending.back();
            pending.pop_back();
            if (in_chain.contains(id) || removed.contains(id) || !by_identity.contains(id)) continue;
            const TraceFacts& f = family.facts(id);
            // A fork that went on to exec is a helper like the launcher; one that did not is a
            // subshell if it allocated next to nothing, else a worker, whose trace stays.
            if (!(f.exec_successor.empty() && !named_as_exec_image(by_identity[id]) ? f.subshell : f.helper)) continue;
            removed.insert(id);
            for (const std::string& child : f.forked) pending.push_back(child);
            if (!f.exec_successor.empty()) pending.push_back(f.exec_successor);
        }
    }
    if (fold) {
        // Elsewhere: helpers that ran another program. A forked worker keeps its trace.
        // Only those are read: a run with many forked workers is not analysed twice over.
        for (const auto& [id, path] : by_identity) {
            if (in_chain.contains(id) || removed.contains(id)) continue;
            if (!named_as_exec_image(path) && !by_identity.contains(identity(trace_names::next_exec_image(path))))
                continue;
            const TraceFacts& f = family.facts(path);
            if (f.helper && (named_as_exec_image(path) || !f.exec_successor.empty())) removed.insert(id);
        }
    }

    std::set<uint64_t> helper_pids;
    const uint64_t program_pid = family.facts(chain.back()).pid;
    for (const std::string& id : removed) {
        const std::string& path = id == chain.front() ? main : by_identity[id];
        std::error_code ec;
        if (!fs::remove(path, ec) || ec) continue;
        ++out.removed_traces;
        uint64_t pid = family.facts(id).pid;
        if (pid != program_pid) helper_pids.insert(pid);
    }
    out.helper_processes = helper_pids.size();
    if (fold && launchers_are_helpers) {
        std::error_code ec;
        fs::rename(by_identity[chain.back()], main, ec);
        if (!ec) {
            out.chain_folded = true;
            in_chain.erase(chain.back());
        } else {
            out.program_trace = by_identity[chain.back()];
        }
    }
    for (const auto& [id, path] : by_identity) {
        if (removed.contains(id) || (out.chain_folded && id == chain.back())) continue;
        out.kept.push_back(path);
    }
    return out;
}

std::string folding_summary(const FoldedTraces& folded) {
    std::string line;
    if (!folded.launchers.empty()) {
        std::string through;
        for (const std::string& l : folded.launchers) through += (through.empty() ? "" : " → ") + l;
        line = fmt::format("the command is {}, launched through {}{}", folded.program, through,
                           folded.chain_folded ? "" : " (their traces are kept: one allocated much)");
    }
    size_t helpers = folded.helper_processes;
    if (helpers > 0) {
        line += fmt::format("{}{} helper process{}, 0 findings (their traces removed)", line.empty() ? "" : "; ",
                            helpers, helpers == 1 ? "" : "es");
    }
    return line;
}

}  // namespace growtrace::cli
