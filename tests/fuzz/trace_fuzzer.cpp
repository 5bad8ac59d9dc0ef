// libFuzzer target: any bytes as a trace file through the reader, the record decoder, the
// whole analysis (retention, symbolization, classification, both reports) and the dumper.
// Bad input must end in TraceError (exit 2 from the CLI), never in a crash, a sanitizer
// report, a hang or unbounded memory. Built by bench/fuzz.sh (clang, -fsanitize=fuzzer).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>

#include "tools/analyze_command.h"

namespace {

// The reader takes a path: each input is written to this process's scratch file.
const std::string& scratch_path() {
    static const std::string path = [] {
        const char* dir = getenv("TMPDIR");
        return std::string(dir && *dir ? dir : "/tmp") + "/gt-fuzz-" + std::to_string(getpid()) + ".gtrace";
    }();
    return path;
}

bool write_input(const uint8_t* data, size_t size) {
    int fd = open(scratch_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n <= 0) {
            close(fd);
            return false;
        }
        data += n;
        size -= static_cast<size_t>(n);
    }
    close(fd);
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (!write_input(data, size)) return 0;
    std::ostringstream out, err;
    growtrace::AnalyzeOptions options;
    options.trace_path = scratch_path();
    options.json = true;
    int status = growtrace::analyze_command(options, out, err);
    if (status != growtrace::kExitOk && status != growtrace::kExitError) __builtin_trap();
    options.json = false;
    out.str("");
    growtrace::analyze_command(options, out, err);
    out.str("");
    status = growtrace::dump_command(scratch_path(), out, err);
    if (status != growtrace::kExitOk && status != growtrace::kExitError) __builtin_trap();
    return 0;
}
