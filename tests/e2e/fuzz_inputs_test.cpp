// Every input the fuzzer (tests/fuzz/, bench/fuzz.sh) ever crashed on, and every seed, through
// `growtrace analyze` and `growtrace dump`: exit 0, or 2 with one "growtrace: error:" line;
// never a signal. The files are replayed in place from the source tree.
#include <algorithm>

#include "e2e_support.h"

namespace growtrace::e2e {
namespace {

std::vector<std::string> inputs_under(const std::string& dir) {
    std::vector<std::string> inputs;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.is_regular_file() && entry.path().extension() != ".md" && !entry.path().filename().string().starts_with("."))
            inputs.push_back(entry.path().string());
    std::sort(inputs.begin(), inputs.end());
    return inputs;
}

void expect_no_crash(const std::string& input) {
    SCOPED_TRACE(input);
    for (const char* verb : {"analyze", "dump"}) {
        std::vector<std::string> args{verb, input};
        if (std::string(verb) == "analyze") args.push_back("--json");
        ProcessResult r = growtrace(args, {.timeout_seconds = 60});
        EXPECT_FALSE(r.timed_out) << verb;
        EXPECT_EQ(r.signal, 0) << verb << " crashed: " << r.err.substr(0, 2000);
        EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2) << verb << ": " << r.describe() << "\n" << r.err;
        if (r.exit_code == 2) {
            EXPECT_TRUE(r.err.starts_with("growtrace: error: ")) << r.err;
            EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        }
    }
}

TEST(FuzzInputs, RegressionsNeverCrash) {
    for (const std::string& input : inputs_under(std::string(GT_FUZZ_DIR) + "/regressions")) expect_no_crash(input);
}

TEST(FuzzInputs, SeedCorpusIsReadable) {
    auto inputs = inputs_under(std::string(GT_FUZZ_DIR) + "/corpus");
    EXPECT_FALSE(inputs.empty());
    for (const std::string& input : inputs) expect_no_crash(input);
}

}  // namespace
}  // namespace growtrace::e2e
