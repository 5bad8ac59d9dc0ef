// Several processes analysed together: a real gunicorn pool serving the openai
// #2672 pattern on 127.0.0.1 (test_programs/python/pool/), with and without the application's
// fix, and multiprocessing.Pool workers with the fork and the spawn start methods. Asserts on
// the merged JSON report: one finding naming every worker, with each worker's figures.
#include <regex>
#include <set>
#include <sstream>

#include "e2e_support.h"

namespace growtrace::e2e {
namespace {

using nlohmann::json;

const std::string kPool = kPythonPrograms + "pool/";

// "pids=861,863" in a program's summary line.
std::set<uint64_t> pids_after(const std::string& out, const std::string& key) {
    std::smatch m;
    std::set<uint64_t> pids;
    if (!std::regex_search(out, m, std::regex(key + "=([0-9,]+)"))) return pids;
    std::istringstream in(m[1].str());
    for (std::string pid; std::getline(in, pid, ',');) pids.insert(std::stoull(pid));
    return pids;
}

json parse_json(const std::string& path) {
    json doc = json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(doc.is_discarded()) << path;
    return doc;
}

// The merged findings of one kind whose cache (or class) has this name.
std::vector<json> merged_cache_findings(const json& report, const std::string& cache) {
    std::vector<json> out;
    for (const json& f : findings_of_kind(report, "cache_growth"))
        if (f["cache"]["name"] == cache) out.push_back(f);
    return out;
}

// What every merged finding must say of itself: its processes, their figures and their sum.
void expect_consistent(const json& f) {
    ASSERT_TRUE(f.contains("per_process")) << f.dump().substr(0, 500);
    EXPECT_EQ(f["processes_with_finding"].get<size_t>(), f["per_process"].size());
    EXPECT_EQ(f["pids"].size(), f["per_process"].size());
    uint64_t sum = 0;
    for (const json& p : f["per_process"]) sum += p["retained_bytes"].get<uint64_t>();
    EXPECT_EQ(f["retained_bytes"].get<uint64_t>(), sum);
}

struct PoolRun {
    ProcessResult driver;
    std::set<uint64_t> workers;  // the pids that answered requests
    json report;                 // growtrace analyze --with-children --json
};

PoolRun run_gunicorn(const ScratchDir& dir, bool fix) {
    PoolRun run;
    std::vector<std::string> args{kVenvPython, kPool + "drive_pool.py", "--growtrace", GT_GROWTRACE, "--trace",
                                  dir / "pool.gtrace", "--workers", "2", "--requests", "48"};
    if (fix) args.push_back("--fix");
    // gunicorn keeps a control socket under $HOME: the scratch directory's, not the user's.
    run.driver = run_process(args, {.cwd = dir.path().string(), .env = {{"HOME", dir.path().string()}},
                                    .timeout_seconds = 400});
    EXPECT_EQ(run.driver.exit_code, 0) << run.driver.out << run.driver.err.substr(0, 4000);
    run.workers = pids_after(run.driver.out, "pids");
    EXPECT_EQ(run.workers.size(), 2u) << "both workers must have served requests: " << run.driver.out;
    ProcessResult analyzed =
        growtrace({"analyze", "--with-children", dir / "pool.gtrace", "--json", "-o", dir / "pool.json"});
    EXPECT_EQ(analyzed.exit_code, 0) << analyzed.err;
    run.report = parse_json(dir / "pool.json");
    return run;
}

bool gunicorn_installed() {
    return access(kVenvPython.c_str(), X_OK) == 0 && run_process({kVenvPython, "-c", "import gunicorn"}).exit_code == 0;
}
#define GT_SKIP_WITHOUT_GUNICORN()                                                                          \
    do {                                                                                                   \
        if (!gunicorn_installed())                                                                         \
            GTEST_SKIP() << kVenvPython                                                                    \
                         << " has no gunicorn (tools/setup_python.sh installs tools/python_requirements.txt)"; \
    } while (0)

TEST(Pool, GunicornWorkersGrowingAreOneFindingNamingEveryWorker) {
    GT_SKIP_WITHOUT_GUNICORN();
    ScratchDir dir;
    PoolRun run = run_gunicorn(dir, /*fix=*/false);
    ASSERT_EQ(run.workers.size(), 2u);

    // The master and its two workers, one program.
    ASSERT_TRUE(run.report.contains("merged")) << run.report.dump().substr(0, 1000);
    EXPECT_EQ(run.report["merged"]["traces"], 3);
    ASSERT_EQ(run.report["merged"]["programs"].size(), 1u) << run.report["merged"].dump();
    EXPECT_EQ(run.report["merged"]["programs"][0]["pids"].size(), 3u);
    EXPECT_EQ(run.report["processes"].size(), 3u);

    std::vector<json> cache = merged_cache_findings(run.report, "openai._models._CachedTypeAdapter");
    ASSERT_EQ(cache.size(), 1u) << run.report["findings"].dump().substr(0, 3000);
    const json& f = cache[0];
    expect_consistent(f);
    EXPECT_EQ(f["processes_with_finding"], 2);
    EXPECT_EQ(f["processes_of_program"], 3);
    EXPECT_EQ(f["pids"].get<std::set<uint64_t>>(), run.workers);
    for (const json& p : f["per_process"]) {
        EXPECT_GT(p["retained_bytes"].get<uint64_t>(), 1'000'000u) << p.dump();
        EXPECT_GT(p["growth_bytes_per_s"].get<double>(), 0) << p.dump();
        EXPECT_TRUE(fs::exists(p["trace"].get<std::string>())) << p.dump();
    }
    EXPECT_TRUE(has_frame(f["frames"], "_validate_non_model_type", "openai/_models.py")) << f["frames"].dump();
    // Each worker's own report is there, with its own finding.
    size_t with_own_finding = 0;
    for (const json& p : run.report["processes"])
        if (run.workers.count(p["pid"].get<uint64_t>())) {
            with_own_finding += !merged_cache_findings(p["report"], "openai._models._CachedTypeAdapter").empty();
            EXPECT_FALSE(p["report"].contains("merged")) << "a process's own report is a one-trace report";
        }
    EXPECT_EQ(with_own_finding, 2u);

    // Said once, naming both workers (the text report's line; the pids most retained first).
    std::vector<std::string> worker_pids;
    for (const json& pid : f["pids"]) worker_pids.push_back(std::to_string(pid.get<uint64_t>()));
    EXPECT_TRUE(std::regex_match(f["summary"].get<std::string>(),
                                 std::regex("in 2 of 3 processes \\(pids " + worker_pids[0] + ", " + worker_pids[1] +
                                            R"(\): [0-9.]+ MB( to [0-9.]+ MB)? each, \+[0-9.]+ [KM]B/s in all)")))
        << f["summary"];
}

TEST(Pool, GunicornWorkersWithTheFixGiveNoFinding) {
    GT_SKIP_WITHOUT_GUNICORN();
    ScratchDir dir;
    PoolRun run = run_gunicorn(dir, /*fix=*/true);
    ASSERT_EQ(run.workers.size(), 2u);
    EXPECT_EQ(run.report["merged"]["traces"], 3);
    EXPECT_TRUE(run.report["findings"].empty()) << run.report["findings"].dump().substr(0, 3000);
    // The cache is there in both workers, and stopped growing.
    size_t seen = 0;
    for (const json& c : run.report["caches"])
        if (c["name"] == "openai._models._CachedTypeAdapter") {
            ++seen;
            EXPECT_TRUE(run.workers.count(c["pid"].get<uint64_t>())) << c.dump().substr(0, 300);
        }
    EXPECT_EQ(seen, 2u) << run.report["caches"].dump().substr(0, 2000);
}

// growtrace check of a multiprocessing.Pool: every trace the run wrote, one merged report.
void check_multiprocessing_pool(const std::string& start_method) {
    if (access(kVenvPython.c_str(), X_OK) != 0) GTEST_SKIP() << kVenvPython << " missing";
    ScratchDir dir;
    ProcessResult r = growtrace({"check", "-o", dir / "mp.gtrace", "--json", dir / "mp.json", "--html", dir / "mp.html", "--", kVenvPython,
                                 kPool + "mp_pool.py", "--start-method", start_method, "--tasks", "120"},
                                {.cwd = dir.path().string(), .timeout_seconds = 400});
    EXPECT_EQ(r.exit_code, 3) << r.out.substr(0, 3000) << r.err.substr(0, 3000);
    const std::set<uint64_t> workers = pids_after(r.out, "workers");
    ASSERT_EQ(workers.size(), 2u) << r.out;
    const json report = parse_json(dir / "mp.json");
    ASSERT_TRUE(report.contains("merged")) << report.dump().substr(0, 500);

    std::vector<json> cache = merged_cache_findings(report, "lru_growth.adapter_for");
    ASSERT_EQ(cache.size(), 1u) << report["findings"].dump().substr(0, 3000);
    const json& f = cache[0];
    expect_consistent(f);
    EXPECT_EQ(f["pids"].get<std::set<uint64_t>>(), workers);
    EXPECT_EQ(f["processes_with_finding"], 2);
    // The parent never calls the cache: with fork it is of the workers' program and holds
    // nothing; spawned workers are a program of their own.
    EXPECT_EQ(f["processes_of_program"].get<int>(), start_method == "fork" ? 3 : 2) << report["merged"].dump();
    for (const json& p : f["per_process"]) EXPECT_GT(p["retained_bytes"].get<uint64_t>(), 500'000u) << p.dump();
    EXPECT_NE(r.out.find("keeps growing in 2 of "), std::string::npos) << r.out.substr(0, 3000);
    // check --html, and report of the set the Fork records name: the page embeds the merged document.
    EXPECT_NE(read_file(dir / "mp.html").find("\"processes_with_finding\":2"), std::string::npos);
    if (start_method == "fork") {
        ProcessResult page = growtrace({"report", "--with-children", dir / "mp.gtrace", "-o", dir / "set.html"});
        EXPECT_EQ(page.exit_code, 0) << page.err;
        EXPECT_NE(read_file(dir / "set.html").find("\"processes_with_finding\":2"), std::string::npos);
    }
}

TEST(Pool, MultiprocessingForkWorkersAreOneFinding) { check_multiprocessing_pool("fork"); }
TEST(Pool, MultiprocessingSpawnWorkersAreOneFinding) { check_multiprocessing_pool("spawn"); }

}  // namespace
}  // namespace growtrace::e2e
