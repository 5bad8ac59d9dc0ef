// The HTML report's page: the embedded assets are put together once, and the data and title
// go where the page marks them, without being searched for markers themselves.
#include <gtest/gtest.h>

#include <string>

#include "analyzer/report/report_html.h"

namespace growtrace {
namespace {

size_t count_of(const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
}

TEST(ReportHtml, PageInlinesItsStyleAndScriptAndLeavesNoMarker) {
    const std::string page = html_page("growtrace: demo", R"({"findings":[]})");
    EXPECT_EQ(count_of(page, "@@GROWTRACE_"), 0u) << "a marker was left in the page";
    EXPECT_EQ(page.find("<script src"), std::string::npos);
    EXPECT_NE(page.find("<title>growtrace: demo</title>"), std::string::npos);
    EXPECT_NE(page.find(R"(id="growtrace-data">{"findings":[]}</script>)"), std::string::npos);
    // The stylesheet and the renderer are the asset files' text, inlined.
    EXPECT_NE(page.find(".card {"), std::string::npos) << "the stylesheet is missing";
    EXPECT_NE(page.find("data-rendered"), std::string::npos) << "the renderer is missing";
    EXPECT_EQ(count_of(page, "</script>"), count_of(page, "<script")) << "a script closes early";
}

TEST(ReportHtml, MarkerLikeTextInDataOrTitleStaysAsItIs) {
    const std::string page = html_page("@@GROWTRACE_DATA@@ <b>", R"({"command":"@@GROWTRACE_TITLE@@ </script>"})");
    EXPECT_NE(page.find("<title>@@GROWTRACE_DATA@@ &lt;b&gt;</title>"), std::string::npos);
    EXPECT_NE(page.find(R"({"command":"@@GROWTRACE_TITLE@@ \u003c/script>"})"), std::string::npos);
    EXPECT_EQ(count_of(page, "@@GROWTRACE_"), 2u);
}

}  // namespace
}  // namespace growtrace
