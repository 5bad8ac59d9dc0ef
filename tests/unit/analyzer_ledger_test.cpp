// The ledger check (analyzer/model/ledger.h): the file's allocations and frees against the tracer's
// Ledger record, in the analysis, its warnings and its JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyzer/analysis/analysis.h"
#include "analyzer/report/report_json.h"
#include "format/trace_format.h"
#include "format/varint.h"
#include "trace_builder.h"

namespace growtrace {
namespace {

using testing::TraceBuilder;
using testing::temp_trace_path;
using format::RecordKind;

std::vector<uint8_t> varints(std::initializer_list<uint64_t> values) {
    std::vector<uint8_t> out;
    for (uint64_t v : values) {
        uint8_t buf[format::kMaxVarintBytes];
        out.insert(out.end(), buf, format::put_varint(buf, v));
    }
    return out;
}

// `pairs` allocations freed at once, then `kept` allocations live, as the tracer writes them;
// then a Ledger record with these figures unless `ledger` is null.
std::string compact_trace(const std::string& name, uint64_t pairs, uint64_t kept, const LedgerRecord* ledger) {
    TraceBuilder b;
    b.process(42, 0, 0);
    b.stack_node(1, 0, 0x1000);
    b.thread(1, 1000);
    for (uint64_t i = 0; i < pairs; ++i) {
        b.raw_record(static_cast<uint8_t>(RecordKind::AllocCompact), varints({64, 1}));
        b.raw_record(static_cast<uint8_t>(RecordKind::FreeCompact), varints({0}));
    }
    for (uint64_t i = 0; i < kept; ++i) b.raw_record(static_cast<uint8_t>(RecordKind::AllocCompact), varints({32, 1}));
    if (ledger) {
        const LedgerRecord& l = *ledger;
        b.raw_record(static_cast<uint8_t>(RecordKind::Ledger),
                     varints({l.allocations_recorded, l.frees_recorded, l.allocations_written, l.frees_written, l.live,
                              l.weightless, l.untraced_frees, l.inferred_frees, l.lost_events}));
    }
    b.end(2000, 2000);
    const std::string path = temp_trace_path(name);
    b.write(path);
    return path;
}

LedgerRecord exact(uint64_t pairs, uint64_t kept) {
    LedgerRecord l;
    l.allocations_recorded = l.allocations_written = pairs + kept;
    l.frees_recorded = l.frees_written = pairs;
    l.live = kept;
    return l;
}

TEST(AnalyzerLedger, ATraceThatBalancesIsSaidToAndWarnsOfNothing) {
    LedgerRecord l = exact(100, 7);
    l.frees_recorded += 3;  // frees of memory never traced: counted, not written
    l.untraced_frees = 3;
    AnalysisResult r = analyze_trace(compact_trace("ledger_balanced", 100, 7, &l));
    EXPECT_TRUE(r.ledger.present);
    EXPECT_TRUE(r.ledger.balanced());
    EXPECT_EQ(r.ledger.file_live(), 7u);
    EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
    nlohmann::json doc = report_json(r);
    EXPECT_EQ(doc["ledger"]["checked"], true);
    EXPECT_EQ(doc["ledger"]["balanced"], true);
    EXPECT_EQ(doc["ledger"]["file_live"], 7);
    EXPECT_EQ(doc["ledger"]["tracer"]["untraced_frees"], 3);
}

TEST(AnalyzerLedger, AFileThatLostAFreeIsSaidInOneLineWithBothFigures) {
    LedgerRecord l = exact(100, 7);
    l.frees_written = 101;  // the tracer wrote one more free than the file holds
    l.frees_recorded = 101;
    l.live = 6;
    AnalysisResult r = analyze_trace(compact_trace("ledger_lost_free", 100, 7, &l));
    EXPECT_FALSE(r.ledger.balanced());
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("holds 7 live allocations"), std::string::npos) << r.warnings[0];
    EXPECT_NE(r.warnings[0].find("the tracer held 6"), std::string::npos) << r.warnings[0];
    EXPECT_EQ(report_json(r)["ledger"]["balanced"], false);
}

TEST(AnalyzerLedger, EventsTheHooksCouldNotRecordAreSaid) {
    LedgerRecord l = exact(10, 2);
    l.lost_events = 5;
    AnalysisResult r = analyze_trace(compact_trace("ledger_lost_events", 10, 2, &l));
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("could not record 5 events"), std::string::npos) << r.warnings[0];
}

TEST(AnalyzerLedger, RecordedFreesMissingFromWhatWasWrittenAreSaid) {
    LedgerRecord l = exact(10, 2);
    l.frees_recorded = 12;  // two recorded frees neither written nor counted as untraced
    AnalysisResult r = analyze_trace(compact_trace("ledger_dropped", 10, 2, &l));
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("recorded 12 allocations"), std::string::npos) << r.warnings[0];
}

TEST(AnalyzerLedger, ATraceWithoutALedgerIsNotChecked) {
    AnalysisResult r = analyze_trace(compact_trace("ledger_none", 10, 2, nullptr));
    EXPECT_FALSE(r.ledger.present);
    EXPECT_TRUE(r.warnings.empty());
    nlohmann::json doc = report_json(r);
    EXPECT_EQ(doc["ledger"]["checked"], false);
    EXPECT_FALSE(doc["ledger"].contains("balanced"));
    EXPECT_EQ(doc["ledger"]["file_allocations"], 12);
}

}  // namespace
}  // namespace growtrace
