// The ledger check: does the trace hold every allocation and free the tracer recorded?
//
// The tracer ends a trace with a Ledger record (format/trace_format.h): what its hooks
// recorded, what it wrote, and the allocations it still held live. The reader counts what the
// file holds (AllocCompact and FreeCompact records, and the samples a ShortLivedSamples record
// counts, which stand for one of each) and compares: a free lost anywhere between the hooks and
// the reader would leave an allocation live for ever and a bounded program reported as growing,
// so a difference is said plainly, with both figures.
#pragma once

#include <cstdint>
#include <string>

#include "analyzer/read/records.h"

namespace growtrace {

struct LedgerCheck {
    bool present = false;  // the trace has a Ledger record
    LedgerRecord tracer;   // what it says
    uint64_t file_allocations = 0;  // what the file holds
    uint64_t file_frees = 0;

    uint64_t file_live() const { return file_allocations - file_frees; }
    // The file holds what the tracer wrote, and the tracer wrote what its hooks recorded.
    bool balanced() const;
    // One plain line saying where the ledger does not balance, with the figures; empty when it
    // balances or there is no record to check against.
    std::string problem() const;
};

}  // namespace growtrace
