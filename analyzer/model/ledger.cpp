#include "analyzer/model/ledger.h"

#include <fmt/format.h>

namespace growtrace {

bool LedgerCheck::balanced() const {
    if (!present) return false;
    const LedgerRecord& t = tracer;
    return file_allocations == t.allocations_written && file_frees == t.frees_written &&
           t.live == t.allocations_written - t.frees_written &&
           t.allocations_written == t.allocations_recorded + t.weightless &&
           t.frees_written + t.untraced_frees == t.frees_recorded + t.inferred_frees && t.lost_events == 0;
}

std::string LedgerCheck::problem() const {
    if (!present || balanced()) return {};
    const LedgerRecord& t = tracer;
    if (file_allocations != t.allocations_written || file_frees != t.frees_written)
        return fmt::format("the trace's ledger does not balance: the file holds {} live allocations ({} allocations, {} "
                           "frees), the tracer held {} ({} allocations, {} frees written): the file lost records",
                           file_live(), file_allocations, file_frees, t.live, t.allocations_written, t.frees_written);
    if (t.lost_events)
        return fmt::format("the trace's ledger does not balance: the tracer could not record {} events (no buffer for "
                           "them); the file holds {} live allocations",
                           t.lost_events, file_live());
    return fmt::format("the trace's ledger does not balance: the hooks recorded {} allocations and {} frees, the tracer "
                       "wrote {} allocations ({} added) and {} frees ({} inferred, {} of untraced memory left out); "
                       "the file holds {} live, the tracer held {}",
                       t.allocations_recorded, t.frees_recorded, t.allocations_written, t.weightless, t.frees_written,
                       t.inferred_frees, t.untraced_frees, file_live(), t.live);
}

}  // namespace growtrace
