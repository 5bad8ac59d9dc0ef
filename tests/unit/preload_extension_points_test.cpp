// The core's two tables that a layer above fills (docs/architecture.md, "Layers and the one-way
// arrows"): the extension points, which do nothing until a table is registered, and the
// writer's doorbell, whose rings go nowhere until the writer connects.
#include <gtest/gtest.h>

#include "preload/record/writer_doorbell.h"
#include "preload/support/extension_points.h"

namespace growtrace::preload {
namespace {

int g_configured = 0, g_reset = 0, g_cycles = 0, g_frames_seen = 0;
SessionOrigin g_last_origin = SessionOrigin::Preloaded;

constexpr ExtensionPoints kCounting = {
    [](const Config&) { ++g_configured; },
    [](SessionOrigin origin) {
        ++g_reset;
        g_last_origin = origin;
    },
    [](RecordSink) { ++g_cycles; },
    [] { ++g_frames_seen; },
};

void no_sink(const format::RecordEncoder&) {}

TEST(ExtensionPoints, TheDefaultTableDoesNothingAndARegisteredOneIsCalled) {
    register_extension(nullptr);
    Config config{};
    extension().configure(config);
    extension().reset(SessionOrigin::Forked);
    extension().writer_cycle(no_sink);
    extension().interpreter_frames_seen();
    EXPECT_EQ(g_configured + g_reset + g_cycles + g_frames_seen, 0);

    register_extension(&kCounting);
    extension().configure(config);
    extension().reset(SessionOrigin::Forked);
    extension().writer_cycle(no_sink);
    extension().interpreter_frames_seen();
    EXPECT_EQ(g_configured, 1);
    EXPECT_EQ(g_reset, 1);
    EXPECT_EQ(g_last_origin, SessionOrigin::Forked);
    EXPECT_EQ(g_cycles, 1);
    EXPECT_EQ(g_frames_seen, 1);

    register_extension(nullptr);  // back to the default: the counting table is no longer called
    extension().interpreter_frames_seen();
    EXPECT_EQ(g_frames_seen, 1);
}

int g_wakes = 0, g_rescans = 0, g_main_ended = 0;
constexpr WriterDoorbell kCountingBell = {[] { ++g_wakes; }, [] { ++g_rescans; }, [] { ++g_main_ended; }};

TEST(WriterDoorbell, RingsGoNowhereUntilTheWriterConnectsThenEachReachesItsHandler) {
    connect_writer(nullptr);
    ring_writer_wake();
    ring_module_rescan();
    ring_main_thread_ended();
    EXPECT_EQ(g_wakes + g_rescans + g_main_ended, 0);

    connect_writer(&kCountingBell);
    ring_writer_wake();
    ring_writer_wake();
    ring_module_rescan();
    ring_main_thread_ended();
    EXPECT_EQ(g_wakes, 2);
    EXPECT_EQ(g_rescans, 1);
    EXPECT_EQ(g_main_ended, 1);
    connect_writer(nullptr);
}

}  // namespace
}  // namespace growtrace::preload
