// growtrace attach reads what gdb printed while it ran tools/attach/gdb_script.py.
#include <gtest/gtest.h>

#include "attach/gdb_output.h"

namespace growtrace::cli {
namespace {

GdbReport read(const std::string& output) {
    GdbReport report;
    report.output = output;
    size_t start = 0;
    for (size_t end; (end = output.find('\n', start)) != std::string::npos; start = end + 1)
        report.take_line(output.substr(start, end - start));
    return report;
}

TEST(GdbOutput, ResultsTextsAndTheLastCall) {
    GdbReport r = read(
        "[Thread debugging using libthread_db enabled]\n"
        "growtrace-calling load\n"
        "growtrace-result load 94211\n"
        "growtrace-calling python\n"
        "growtrace-result python 311\n"
        "growtrace-calling trace\n"
        "growtrace-text trace /tmp/a b.gtrace\n"
        "growtrace-calling start\n"
        "growtrace-result start -2\n");
    EXPECT_EQ(r.results.at("load"), 94211);
    EXPECT_EQ(r.results.at("python"), 311);
    EXPECT_EQ(r.results.at("start"), -2);
    EXPECT_EQ(r.texts.at("trace"), "/tmp/a b.gtrace");
    EXPECT_EQ(r.calling, "start");
    EXPECT_EQ(r.failure, "");
    EXPECT_EQ(r.waits, 0);
}

TEST(GdbOutput, WaitsAreAnnouncedAndCountedAGiveUpIsNot) {
    GdbReport r;
    auto wait = r.take_line("growtrace-waiting 1 __libc_malloc 1");
    ASSERT_TRUE(wait.has_value());
    EXPECT_EQ(wait->thread, "1");
    EXPECT_EQ(wait->function, "__libc_malloc");
    EXPECT_TRUE(r.take_line("growtrace-waiting 1 _IO_getline 1").has_value());
    EXPECT_FALSE(r.take_line("growtrace-gave-up 1 _IO_getline 1").has_value());
    EXPECT_EQ(r.waits, 2);
    EXPECT_EQ(r.gave_up_in, "_IO_getline");
}

TEST(GdbOutput, TheComplaintIsTheFailureElseGdbsLastOwnLine) {
    GdbReport failed = read("growtrace-calling stop\ngrowtrace-failed stop No symbol \"growtrace_attach_stop\" in current context.\n");
    EXPECT_EQ(failed.failed_call, "stop");
    EXPECT_EQ(failed.complaint(), "No symbol \"growtrace_attach_stop\" in current context.");

    GdbReport chatter = read(
        "Could not attach to process.\n"
        "[New LWP 12]\n"
        "[Inferior 1 (process 5) detached]\n"
        "0x00007f in read () from /lib/libc.so.6\n"
        "$1 = 0\n"
        "growtrace-calling load\n");
    EXPECT_EQ(chatter.complaint(), "Could not attach to process.");
    EXPECT_EQ(read("").complaint(), "");
}

}  // namespace
}  // namespace growtrace::cli
