// A program whose only growth is inside a stripped library it calls (libgt_hidden_registry.so,
// hidden_registry.cpp): each request hands a record to registry_remember(), which keeps it
// for ever through two internal paths. Beside it, a bounded working set of its own that churns.
// The analyzer must report one root cause, named by this program's calling frame, the library
// and the exported function, with no bare "??" frame.
//
//     library_grower [SECONDS=3]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

extern "C" void registry_remember(unsigned key);
extern "C" unsigned registry_size();

namespace {

void* g_scratch[64];

__attribute__((noinline)) void handle_request(unsigned i) {
    registry_remember(i);  // LINE-MARK: registry_remember
    // The program's own memory: a fixed ring of scratch blocks, freed as it goes round.
    std::free(g_scratch[i % 64]);
    g_scratch[i % 64] = std::malloc(128 + i % 512);
}

}  // namespace

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    unsigned i = 0;
    while (std::chrono::steady_clock::now() < end) {
        for (int k = 0; k < 200; ++k) handle_request(i++);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    for (void*& p : g_scratch) std::free(p);
    std::printf("remembered %u\n", registry_size());
    return 0;
}
