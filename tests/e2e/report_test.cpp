// The reports people look at and the CI gate: `growtrace report` / `analyze --html` pages
// rendered in headless Chromium (asserting on the DOM after the page's JS ran), the
// `analyze --plot` SVG, and `growtrace check`'s exit statuses.
#include <unistd.h>

#include <map>
#include <regex>
#include <set>

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

// Two processes of one program each growing a module-level dict (containers.py): the merged
// report (JSON, text, HTML) has one container finding naming both, as it has one cache finding.
TEST(Report, TwoProcessesGrowingOneContainerAreOneMergedContainerFindingOnEveryReport) {
    if (access(kVenvPython.c_str(), X_OK) != 0) GTEST_SKIP() << kVenvPython << " missing";
    ScratchDir dir;
    std::vector<std::string> traces;
    for (const char* count : {"4000", "6000"}) {
        traces.push_back(dir / (std::string("containers-") + count + ".gtrace"));
        trace_program(dir, traces.back(), {kVenvPython, kPythonPrograms + "containers.py", "--case", "request_cache", "--count", count});
    }
    const std::string out = dir / "merged.json";
    ProcessResult r = growtrace({"analyze", traces[0], traces[1], "--json", "-o", out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json report = nlohmann::json::parse(read_file(out));
    ASSERT_TRUE(report.contains("merged"));
    std::vector<nlohmann::json> named;
    for (const nlohmann::json& f : report["findings"])
        if (f["kind"] == "container_growth" && f["container"]["name"] == "__main__._RESPONSES") named.push_back(f);
    ASSERT_EQ(named.size(), 1u) << report["findings"].dump().substr(0, 3000);
    const nlohmann::json& f = named[0];
    EXPECT_EQ(f["processes_with_finding"], 2);
    EXPECT_EQ(f["processes_of_program"], 2);
    ASSERT_EQ(f["per_process"].size(), 2u);
    EXPECT_EQ(f["live_allocations"].get<uint64_t>(), 10000u) << "the entries at the last walk of each, summed";
    EXPECT_EQ(f["role"], "root");
    const nlohmann::json& root = report["root_causes"][f["root_cause"].get<int>() - 1];
    EXPECT_EQ(root["kind"], "container_growth");
    EXPECT_EQ(root["title"], "dict __main__._RESPONSES keeps growing");
    EXPECT_TRUE(contains(root["summary"].get<std::string>(), "in 2 of 2 processes")) << root["summary"];
    // The stacks that hold its entries, merged too, are its evidence.
    for (const nlohmann::json& s : report["findings"]) {
        if (s["kind"] == "unbounded_growth" && has_frame(s["frames"], "make_value", "containers.py")) {
            EXPECT_EQ(s["root_cause"], f["root_cause"]) << s.dump().substr(0, 1000);
        }
    }
    size_t pids = 0;
    for (const nlohmann::json& c : report["containers"]) pids += c.contains("pid");
    EXPECT_EQ(pids, report["containers"].size());

    ProcessResult text = growtrace({"analyze", traces[0], traces[1]});
    EXPECT_TRUE(contains(text.out, "dict __main__._RESPONSES keeps growing in 2 of 2 processes")) << text.out.substr(0, 3000);
    EXPECT_TRUE(contains(text.out, "filled from:")) << text.out.substr(0, 3000);

    const std::string html = dir / "merged.html";
    ProcessResult page = growtrace({"report", traces[0], traces[1], "-o", html});
    ASSERT_EQ(page.exit_code, 0) << page.err;
    if (chromium().empty()) GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it); the page was not rendered";
    ProcessResult browser = dump_dom(dir, html);
    const std::string& dom = browser.out;
    expect_rendered(browser, dom);
    EXPECT_TRUE(contains(dom, "dict __main__._RESPONSES keeps growing")) << "the root cause's title";
    EXPECT_TRUE(contains(dom, "growing container")) << "the finding's kind";
    EXPECT_TRUE(contains(dom, "<h4>Container</h4>")) << "the container's box";
    EXPECT_TRUE(contains(dom, "aria-label=\"finding " + std::to_string(f["id"].get<int>()) + " over time\""));
    EXPECT_TRUE(contains(dom, "store_response")) << "its inserting stack";
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

// ---- the page as a person sees it ------------------------------------------------------------
using nlohmann::json;

const std::string kDataIsland = "<script type=\"application/json\" id=\"growtrace-data\">";

// The JSON a page embeds, and the page with other JSON in its place (made safe as
// report_html.cpp does).
json page_data(const std::string& page) {
    const size_t from = page.find(kDataIsland), to = page.find("</script>", from);
    if (from == std::string::npos || to == std::string::npos) return json();
    return json::parse(page.substr(from + kDataIsland.size(), to - from - kDataIsland.size()), nullptr, false);
}
std::string with_page_data(const std::string& page, const json& data) {
    const size_t from = page.find(kDataIsland) + kDataIsland.size(), to = page.find("</script>", from);
    std::string text;
    for (char c : data.dump()) text += c == '<' ? std::string("\\u003c") : std::string(1, c);
    return page.substr(0, from) + text + page.substr(to);
}

// Renders `html` in a 1280 px wide window with tests/e2e/report_probe.js added at its end, and
// returns what the probe measured (see that file), after checking the page rendered.
json render_and_probe(const ScratchDir& dir, const std::string& html, const std::string& name) {
    std::string page = read_file(html);
    page.insert(page.rfind("</body>"), "<script>\n" + read_file(std::string(GT_SOURCE_DIR) + "/tests/e2e/report_probe.js") + "</script>\n");
    const std::string probed = dir / (name + ".probed.html");
    write_file(probed, page);
    ProcessResult browser = run_process({chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                                         "--user-data-dir=" + (dir / "chromium-profile"), "--enable-logging=stderr", "--v=0",
                                         "--window-size=1280,900", "--dump-dom", "file://" + probed},
                                        {.timeout_seconds = 120});
    expect_rendered(browser, browser.out);
    const std::string open = "<pre id=\"gt-probe\">{";
    const size_t from = browser.out.find(open), to = browser.out.find("</pre>", from);
    if (from == std::string::npos || to == std::string::npos) {
        ADD_FAILURE() << "the probe left no measurements\n" << browser.err.substr(0, 3000);
        return json();
    }
    return json::parse(browser.out.substr(from + open.size() - 1, to - from - open.size() + 1), nullptr, false);
}

// Root causes as the analyzer adds them to its JSON, made from the report's own findings when
// its analyzer predates them: the growing cache is the root; the classes its keys miss on, the
// other repeated classes and the stacks it explains are its evidence; any other finding is a
// root of its own.
json with_root_causes(json data) {
    json& findings = data["findings"];
    size_t cache_id = 0;
    std::string cache_name;
    std::set<std::string> key_classes;
    for (size_t i = 0; i < findings.size(); ++i) {
        findings[i]["id"] = i + 1;
        if (findings[i]["kind"] == "cache_growth" && cache_id == 0) {
            cache_id = i + 1;
            cache_name = findings[i]["cache"]["name"];
            for (const json& k : findings[i]["cache"]["key_types"]) key_classes.insert(k["name"].get<std::string>());
        }
    }
    json causes = json::array();
    auto add_cause = [&](size_t finding, const std::string& title) {
        const json& f = findings[finding - 1];
        causes.push_back({{"id", causes.size() + 1}, {"finding", finding}, {"kind", f["kind"]}, {"title", title},
                          {"summary", "made by the test from finding " + std::to_string(finding)},
                          {"remedy", "bound what holds it"}, {"retained_bytes", f["retained_bytes"]},
                          {"growth_bytes_per_s", f["growth_bytes_per_s"]}, {"members", json::array()}});
        findings[finding - 1]["root_cause"] = causes.size();
        findings[finding - 1]["role"] = "root";
    };
    if (cache_id) add_cause(cache_id, "cache " + cache_name + " keeps growing");
    for (size_t i = 0; i < findings.size(); ++i) {
        json& f = findings[i];
        if (i + 1 == cache_id) continue;
        std::string relation;
        if (cache_id && f["kind"] == "duplicate_types")
            relation = key_classes.count(f["type"]["name"].get<std::string>()) ? "key_class" : "same_call";
        else if (cache_id && f.value("explained_by_cache", json()) == cache_name)
            relation = "holds_entries";
        if (relation.empty()) {
            add_cause(i + 1, "memory of finding " + std::to_string(i + 1) + " keeps growing");
            continue;
        }
        causes[0]["members"].push_back({{"finding", i + 1}, {"relation", relation}});
        f["root_cause"] = 1;
        f["role"] = "evidence";
    }
    data["root_causes"] = causes;
    return data;
}

bool has_any(const std::string& text, const std::vector<std::string>& parts) {
    for (const std::string& p : parts)
        if (contains(text, p)) return true;
    return false;
}
const std::vector<std::string> kUnnamed = {"??", "type_new", "infinite_lru_cache_wrapper"};

// What a person reads on the page of `data`, as the probe measured it: titles that name the
// cache, the class or a function; figures of a class finding in classes; axes in their units
// with ticks that differ; each stack once per finding, numbered whole; nothing wider than the
// window; and root causes first when the JSON has them.
void expect_readable(const json& probe, const json& data) {
    ASSERT_TRUE(probe.is_object()) << "no measurements";
    EXPECT_GE(probe["client_width"].get<int>(), 1200) << "the window is not 1280 px wide";
    EXPECT_LE(probe["scroll_width"].get<int>(), probe["client_width"].get<int>())
        << "the page scrolls sideways; too wide: " << probe["too_wide"].dump();
    const json& findings = data["findings"];
    std::map<std::string, json> by_card;
    for (size_t i = 0; i < findings.size(); ++i)
        by_card["finding-" + std::to_string(findings[i].value("id", i + 1))] = findings[i];

    std::map<std::string, int> cards;
    bool two_digit_numbers = false;
    for (const json& card : probe["findings"]) {
        const std::string id = card["id"], title = card["title"];
        ++cards[id];
        SCOPED_TRACE(id + " titled " + title);
        ASSERT_TRUE(by_card.count(id)) << "a card of no finding";
        const json& f = by_card[id];
        EXPECT_FALSE(title.empty());
        EXPECT_FALSE(has_any(title, kUnnamed));
        std::map<std::string, std::string> figures;
        for (const json& row : card["figures"]) figures.emplace(row[0].get<std::string>(), row[1].get<std::string>());
        if (f["kind"] == "cache_growth") {
            EXPECT_EQ(title, f["cache"]["name"]);
        }
        if (f["kind"] == "duplicate_types") {
            EXPECT_EQ(title, f["type"]["name"]);
            EXPECT_EQ(figures["classes created"], std::to_string(f["type"]["created"].get<int>()));
            EXPECT_EQ(figures["alive at end"], std::to_string(f["type"]["live_at_end"].get<int>()));
            EXPECT_TRUE(figures["creation rate"].ends_with(" classes/s")) << figures["creation rate"];
            EXPECT_FALSE(figures.count("retained at end") || figures.count("allocations")) << card["figures"].dump();
        }
        const json& stacks = card["stacks"];
        EXPECT_GE(stacks.size(), 1u);
        for (size_t a = 0; a < stacks.size(); ++a) {
            for (size_t b = a + 1; b < stacks.size(); ++b) EXPECT_NE(stacks[a], stacks[b]) << "a stack printed twice";
            for (size_t k = 0; k < stacks[a].size(); ++k) {
                const json& item = stacks[a][k];
                if (item["number"].is_null()) continue;  // "… more frames"
                EXPECT_EQ(item["number"], std::to_string(k + 1) + ".");
                EXPECT_FALSE(item["cut"].get<bool>()) << "number " << item["number"] << " is cut";
                two_digit_numbers |= k + 1 >= 10;
            }
        }
    }
    EXPECT_TRUE(two_digit_numbers) << "no stack of 10 frames or more was checked";
    EXPECT_EQ(cards.size(), findings.size()) << "not every finding has its card";
    for (const auto& [id, n] : cards) EXPECT_EQ(n, 1) << id << " is shown " << n << " times";

    const std::set<std::string> units = {"bytes", "entries", "classes"};
    const std::regex byte_label("^[0-9.]+ (B|KB|MB|GB)$");
    for (const json& chart : probe["charts"]) {
        const std::string label = chart["label"];
        SCOPED_TRACE("chart " + label);
        for (const char* side : {"left", "right"}) {
            const json& ticks = chart[side];
            const json& unit = chart[std::string(side) + "_unit"];
            if (std::string(side) == "right" && ticks.empty()) continue;
            ASSERT_TRUE(unit.is_string()) << side << " axis without a unit";
            EXPECT_TRUE(units.count(unit.get<std::string>())) << unit;
            EXPECT_GE(ticks.size(), 2u);
            EXPECT_EQ(std::set<json>(ticks.begin(), ticks.end()).size(), ticks.size()) << "ticks read the same: " << ticks.dump();
            if (unit == "bytes") {
                for (const json& t : ticks) EXPECT_TRUE(std::regex_match(t.get<std::string>(), byte_label)) << t;
            }
        }
        for (const json& legend : chart["legend"]) EXPECT_FALSE(has_any(legend.get<std::string>(), kUnnamed)) << legend;
        // A finding's chart is in the units of what it counts.
        auto card = by_card.find("finding-" + (label.starts_with("finding ") ? label.substr(8, label.find(' ', 8) - 8) : ""));
        if (card == by_card.end()) continue;
        if (card->second["kind"] == "cache_growth") {
            EXPECT_EQ(chart["left_unit"], "bytes");
            EXPECT_EQ(chart["right_unit"], "entries");
        }
        if (card->second["kind"] == "duplicate_types") {
            EXPECT_EQ(chart["left_unit"], "classes");
        }
    }

    const json causes = data.value("root_causes", json::array());
    if (causes.empty()) return;
    ASSERT_FALSE(probe["headings"].empty());
    EXPECT_TRUE(probe["headings"][0].get<std::string>().ends_with(causes.size() == 1 ? "Root cause" : "Root causes"))
        << "the page does not start with its root causes: " << probe["headings"].dump();
    EXPECT_TRUE(probe["verdict"].get<std::string>().starts_with(std::to_string(causes.size()) + " root cause"))
        << probe["verdict"];
    ASSERT_EQ(probe["root_causes"].size(), causes.size());
    for (size_t i = 0; i < causes.size(); ++i) {
        const json& shown = probe["root_causes"][i];
        EXPECT_EQ(shown["title"], causes[i]["title"]);
        EXPECT_EQ(shown["summary"], causes[i]["summary"]);
        EXPECT_TRUE(contains(shown["remedy"].get<std::string>(), causes[i]["remedy"].get<std::string>())) << shown["remedy"];
        std::set<std::string> expected = {"finding-" + std::to_string(causes[i]["finding"].get<int>())};
        for (const json& m : causes[i]["members"]) expected.insert("finding-" + std::to_string(m["finding"].get<int>()));
        const json& cards_in = shown["findings"];
        EXPECT_EQ(std::set<std::string>(cards_in.begin(), cards_in.end()), expected) << "evidence of root cause " << i + 1;
    }
}

// The README's demo (issue #2672 of openai-python in threads mode): its page at 1280 px names
// what grows and reads in units, whether or not its analyzer names root causes; with root
// causes (the analyzer's, or made from its findings) the page leads with them.
TEST(Report, HtmlOfTheOpenAIDemoReadsWellAt1280Px) {
    const PythonUnderTest venv{"3.11", kVenvPython, true};
    GT_SKIP_UNLESS_INSTALLED(venv, true);
    if (chromium().empty()) GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it)";
    ScratchDir dir;
    std::string trace = dir / "demo.gtrace";
    trace_program(dir, trace, {venv.python, kPythonPrograms + "openai_repro/repro.py", "--mode", "threads", "--requests", "24"});
    std::string html = dir / "demo.html";
    ProcessResult r = growtrace({"report", trace, "-o", html});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string page = read_file(html);
    const json data = page_data(page);
    ASSERT_TRUE(data.is_object() && data["findings"].size() >= 2) << "the demo has a cache and its classes as findings";
    {
        SCOPED_TRACE("the page as the analyzer wrote it");
        expect_readable(render_and_probe(dir, html, "demo"), data);
    }
    if (data.contains("root_causes")) return;
    SCOPED_TRACE("the same page with root causes made from its findings");
    const json grouped = with_root_causes(data);
    ASSERT_GE(grouped["root_causes"][0]["members"].size(), 1u) << "the cache explains none of the other findings";
    std::string grouped_html = dir / "demo-root-causes.html";
    write_file(grouped_html, with_page_data(page, grouped));
    expect_readable(render_and_probe(dir, grouped_html, "grouped"), grouped);
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
