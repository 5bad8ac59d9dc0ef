// Benchmark workload: two threads, each performing millions of malloc/free pairs of mixed
// sizes from call depths 1 to 9 (bench/churn_worker.h). Prints a checksum so the work cannot be
// optimised away.
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "churn_worker.h"

int main(int argc, char** argv) {
    long pairs = argc > 1 ? std::atol(argv[1]) : 2000000;
    NoHooks none;
    ChurnWorker<NoHooks> a(1, none), b(2, none);
    std::thread ta([&] { a.run(pairs); });
    std::thread tb([&] { b.run(pairs); });
    ta.join();
    tb.join();
    std::printf("checksum %llu\n", a.checksum + b.checksum);
    return 0;
}
