// The reports people look at and the CI gate: `growtrace report` / `analyze --html` pages
// rendered in headless Chromium (asserting on the DOM after the page's JS ran), the
// `analyze --plot` SVG, and `growtrace check`'s exit statuses.
#include <unistd.h>

#include <regex>

#include "e2e_support.h"

namespace growtrace::e2e {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t count_of(const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
}

// First executable of `names` on PATH (or in /usr/bin), empty if none.
std::string find_program(const std::vector<std::string>& names) {
    std::string path = getenv("PATH") ? getenv("PATH") : "";
    path += ":/usr/bin:/bin";
    for (const std::string& name : names) {
        size_t start = 0;
        while (start <= path.size()) {
            size_t end = path.find(':', start);
            if (end == std::string::npos) end = path.size();
            std::string candidate = path.substr(start, end - start) + "/" + name;
            if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
            start = end + 1;
        }
    }
    return {};
}

std::string chromium() { return find_program({"chromium", "chromium-browser", "google-chrome"}); }

// The page's DOM after its scripts ran, with the browser's log (console errors) in err.
ProcessResult dump_dom(const ScratchDir& dir, const std::string& html) {
    return run_process({chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                        "--user-data-dir=" + (dir / "chromium-profile"), "--enable-logging=stderr", "--v=0",
                        "--dump-dom", "file://" + html},
                       {.timeout_seconds = 120});
}

// The text of the element with this id in a dumped DOM ("" if empty or absent).
std::string element_text(const std::string& dom, const std::string& id) {
    std::smatch m;
    std::regex pattern("<div id=\"" + id + "\"[^>]*>([^<]*)</div>");
    return std::regex_search(dom, m, pattern) ? m[1].str() : std::string();
}

// Is there an SVG path with at least two points ("M x,y L x,y")?
bool has_drawn_path(const std::string& dom) {
    for (size_t at = dom.find("<path "); at != std::string::npos; at = dom.find("<path ", at + 1)) {
        const std::string tag = dom.substr(at, dom.find('>', at) - at);
        const size_t d = tag.find(" d=\"M");
        if (d != std::string::npos && tag.find('L', d) != std::string::npos) return true;
    }
    return false;
}

// Asserts what every rendered report shows: no script error, the memory chart with its curve,
// both flame graphs.
void expect_rendered(const ProcessResult& browser, const std::string& dom) {
    ASSERT_EQ(browser.exit_code, 0) << browser.describe() << "\n" << browser.err;
    EXPECT_TRUE(contains(dom, "data-rendered=\"true\"")) << "the renderer did not finish\n" << dom.substr(0, 3000);
    EXPECT_EQ(element_text(dom, "gt-errors"), "") << "script errors shown on the page";
    EXPECT_FALSE(contains(browser.err, "Uncaught")) << browser.err;
    EXPECT_TRUE(contains(dom, "Memory over time"));
    EXPECT_TRUE(contains(dom, "aria-label=\"memory over time\"")) << "no memory chart";
    EXPECT_TRUE(has_drawn_path(dom)) << "no curve drawn";
    EXPECT_TRUE(contains(dom, "retained memory flame graph"));
    EXPECT_TRUE(contains(dom, "growth flame graph") || contains(dom, "no stack grew"));
}

// A report must not reach out: nothing loaded from anywhere.
void expect_self_contained(const std::string& html) {
    EXPECT_FALSE(contains(html, "<link")) << "external stylesheet";
    EXPECT_FALSE(std::regex_search(html, std::regex("<script[^>]* src="))) << "external script";
    EXPECT_FALSE(std::regex_search(html, std::regex("url\\(\\s*['\"]?(https?:|//)"))) << "external CSS resource";
    EXPECT_FALSE(contains(html, "@import"));
    EXPECT_FALSE(std::regex_search(html, std::regex("https?://(?!www\\.w3\\.org/2000/svg)"))) << "a URL in the page";
}

TEST(Report, HtmlOfMemoTableShowsTheFindingItsCurveAndStack) {
    ScratchDir dir;
    std::string trace = dir / "memo.gtrace";
    trace_program(dir, trace, {GT_PROGRAM_MEMO_TABLE, "1000", "2000"});
    std::string html = dir / "memo.html";
    ProcessResult r = growtrace({"report", trace, "-o", html});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "report written to " + html)) << r.err;
    std::string page = read_file(html);
    expect_self_contained(page);
    EXPECT_TRUE(contains(page, "<script type=\"application/json\" id=\"growtrace-data\">"));

    if (chromium().empty()) GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it); the page was not rendered";
    ProcessResult browser = dump_dom(dir, html);
    const std::string& dom = browser.out;
    expect_rendered(browser, dom);
    EXPECT_TRUE(contains(dom, "1 unbounded growth finding")) << dom.substr(0, 3000);
    EXPECT_TRUE(contains(dom, "id=\"finding-1\""));
    EXPECT_TRUE(contains(dom, "aria-label=\"finding 1 over time\"")) << "no curve of the finding";
    EXPECT_TRUE(contains(dom, "remember_result"));
    EXPECT_TRUE(contains(dom, "memo_table.cpp:" + std::to_string(marker_line("memo_table.cpp", "remember_result"))));
    EXPECT_TRUE(contains(dom, "Why: ")) << "the verdict's reason is missing";
    EXPECT_TRUE(contains(dom, "growth rate"));
}

TEST(Report, HtmlOfBoundedLruShowsNoFindingAndWhyTheCacheIsNotOne) {
    ScratchDir dir;
    std::string trace = dir / "lru.gtrace";
    trace_program(dir, trace, {GT_PROGRAM_BOUNDED_LRU, "20000", "500", "1000", "10"});
    std::string html = dir / "lru.html";
    // The analyze flavour: text on stdout, the page as a side product.
    ProcessResult r = growtrace({"analyze", trace, "--html", html});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "no unbounded growth found")) << r.out;
    expect_self_contained(read_file(html));

    if (chromium().empty()) GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it); the page was not rendered";
    ProcessResult browser = dump_dom(dir, html);
    const std::string& dom = browser.out;
    expect_rendered(browser, dom);
    EXPECT_TRUE(contains(dom, "no unbounded growth found"));
    EXPECT_TRUE(contains(dom, "Considered and not findings"));
    EXPECT_TRUE(contains(dom, "lru_store"));
    EXPECT_TRUE(contains(dom, "grew, then stopped")) << "the bounded LRU's explanation is missing";
}

// A sampled trace's page says the figures are estimates and shows their uncertainty.
TEST(Report, HtmlOfASampledTraceShowsEstimatesWithTheirUncertainty) {
    ScratchDir dir;
    std::string trace = dir / "memo.gtrace";
    trace_program(dir, trace, {GT_PROGRAM_MEMO_TABLE, "1000", "2000", "--block-size", "65536"}, 0,
                  mode_options(TraceMode::Sampled));
    std::string html = dir / "memo.html";
    ProcessResult r = growtrace({"analyze", trace, "--html", html});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "sampled trace: one sample per 524.3 KB")) << r.out;
    EXPECT_TRUE(contains(r.out, " ± ")) << r.out;
    expect_self_contained(read_file(html));

    if (chromium().empty()) GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it); the page was not rendered";
    ProcessResult browser = dump_dom(dir, html);
    const std::string& dom = browser.out;
    expect_rendered(browser, dom);
    EXPECT_TRUE(contains(dom, "1 unbounded growth finding")) << dom.substr(0, 3000);
    EXPECT_TRUE(contains(dom, "one sample per 524.3 KB allocated on average")) << dom.substr(0, 3000);
    EXPECT_TRUE(contains(dom, " ± ")) << "the finding's retained bytes lack their uncertainty";
    EXPECT_TRUE(contains(dom, " samples)"));
    EXPECT_TRUE(contains(dom, "≈ ")) << "estimated counts are not marked";
}

// Well-formedness: xmllint if there is one, else a check that tags nest and close.
void expect_well_formed_xml(const ScratchDir& dir, const std::string& path) {
    std::string xmllint = find_program({"xmllint"});
    if (!xmllint.empty()) {
        ProcessResult lint = run_process({xmllint, "--noout", path});
        EXPECT_EQ(lint.exit_code, 0) << lint.err;
        return;
    }
    (void)dir;
    std::string text = read_file(path);
    std::vector<std::string> open;
    std::regex tag("<(/?)([A-Za-z][\\w:-]*)[^>]*?(/?)>");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), tag); it != std::sregex_iterator(); ++it) {
        const std::smatch& m = *it;
        if (m[1] == "/") {
            ASSERT_FALSE(open.empty()) << "closing " << m[2] << " with nothing open";
            ASSERT_EQ(open.back(), m[2].str());
            open.pop_back();
        } else if (m[3] != "/") {
            open.push_back(m[2]);
        }
    }
    EXPECT_TRUE(open.empty()) << open.size() << " unclosed elements";
}

TEST(Report, PlotIsAValidSvgWithTheMemoryAndFindingCurves) {
    ScratchDir dir;
    std::string trace = dir / "memo.gtrace";
    trace_program(dir, trace, {GT_PROGRAM_MEMO_TABLE, "1000", "2000"});
    std::string svg = dir / "growth.svg";
    ProcessResult r = growtrace({"analyze", trace, "--plot", svg, "--fail-on-growth"});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    std::string text = read_file(svg);
    EXPECT_TRUE(text.starts_with("<?xml")) << text.substr(0, 200);
    EXPECT_TRUE(contains(text, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    expect_well_formed_xml(dir, svg);
    // The traced heap and the finding's retained bytes (RSS too, when the trace has marks).
    EXPECT_GE(count_of(text, "<path class=\"curve\""), 2u) << text.substr(0, 2000);
    EXPECT_TRUE(contains(text, "traced heap"));
    EXPECT_TRUE(contains(text, "remember_result"));

    // `report -o X.svg` writes the same plot.
    std::string svg2 = dir / "again.svg";
    ProcessResult again = growtrace({"report", trace, "-o", svg2});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(read_file(svg2), text);
}

TEST(Report, ReportOfAMissingTraceFails) {
    ScratchDir dir;
    ProcessResult r = growtrace({"report", dir / "absent.gtrace", "-o", dir / "x.html"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(r.err.starts_with("growtrace: error: ")) << r.err;
}

TEST(Check, MemoTableFailsWithStatus3AndPrintsTheReport) {
    ScratchDir dir;
    std::string html = dir / "check.html";
    ProcessResult r = growtrace({"check", "-o", dir / "memo.gtrace", "--html", html, "--", GT_PROGRAM_MEMO_TABLE, "1000", "2000"},
                                {.cwd = dir.path().string()});
    EXPECT_EQ(r.exit_code, 3) << r.describe() << "\n" << r.err;
    EXPECT_TRUE(contains(r.out, "memo_table: 1000 entries")) << "the command's own output is untouched\n" << r.out;
    EXPECT_TRUE(contains(r.out, "1 unbounded growth finding")) << r.out;
    EXPECT_TRUE(contains(r.out, "remember_result")) << r.out;
    EXPECT_TRUE(contains(r.err, "check failed")) << r.err;
    EXPECT_TRUE(contains(read_file(html), "growtrace-data"));
}

// The report is the first thing check prints on stdout when the command prints nothing there.
TEST(Check, StdoutStartsWithTheTraceItChecks) {
    ScratchDir dir;
    ProcessResult r = growtrace({"check", "-o", dir / "quiet.gtrace", "--", GT_PROGRAM_EXIT_WITH, "--lines", "0"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.out.starts_with("growtrace check: " + (dir / "quiet.gtrace") + "\n")) << r.out;
}

TEST(Check, BoundedLruPasses) {
    ScratchDir dir;
    ProcessResult r = growtrace({"check", "-o", dir / "lru.gtrace", "--", GT_PROGRAM_BOUNDED_LRU, "20000", "500", "1000", "10"},
                                {.cwd = dir.path().string()});
    EXPECT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err << r.out;
    EXPECT_TRUE(contains(r.out, "no unbounded growth found")) << r.out;
    EXPECT_TRUE(contains(r.err, "check passed")) << r.err;
}

TEST(Check, MissingCommandOrNoCommandIsAnError) {
    ScratchDir dir;
    ProcessResult missing = growtrace({"check", "--", dir / "no-such-program"}, {.cwd = dir.path().string()});
    EXPECT_EQ(missing.exit_code, 2) << missing.err;
    EXPECT_TRUE(contains(missing.err, "growtrace: error: command not found")) << missing.err;

    ProcessResult none = growtrace({"check"}, {.cwd = dir.path().string()});
    EXPECT_EQ(none.exit_code, 2) << none.err;
}

TEST(Check, FailingCommandWithoutGrowthExits4) {
    ScratchDir dir;
    ProcessResult r = growtrace({"check", "-o", dir / "x.gtrace", "--", GT_PROGRAM_EXIT_WITH, "--status", "5"},
                                {.cwd = dir.path().string()});
    EXPECT_EQ(r.exit_code, 4) << r.describe() << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "the command failed (growtrace run status 5)")) << r.err;
    EXPECT_TRUE(contains(r.out, "no unbounded growth found")) << r.out;
}

}  // namespace
}  // namespace growtrace::e2e
