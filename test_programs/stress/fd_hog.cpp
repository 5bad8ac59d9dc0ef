// Preloaded after libgrowtrace.so by tests/e2e/stress_test.cpp, so its constructor runs before
// the tracer's, lowers RLIMIT_NOFILE to 64 and opens /dev/null until no descriptor is left, so
// the tracer finds none for its libunwind and its trace file.
#include <fcntl.h>
#include <sys/resource.h>

namespace {
__attribute__((constructor)) void use_every_descriptor() {
    rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max < 64 ? limit.rlim_max : 64;
    setrlimit(RLIMIT_NOFILE, &limit);
    while (open("/dev/null", O_RDONLY) >= 0) {
    }
}
}  // namespace
