// A long-running service for `growtrace attach`: prints "tick N" every 100 ms (so a test can
// see it is alive and its output unchanged) and, at every tick, grows a session table by
// kEntriesPerTick blocks of kEntrySize bytes allocated by the malloc at the LINE-MARK below in
// remember_session, never freed. It also makes a short-lived allocation per tick, and frees
// one of the kStartupBlocks blocks it allocated before its first tick per tick: when attached
// after start-up those frees have no traced allocation and must be ignored.
//
// usage: long_running [SECONDS=60] [THREADS=0]   (exits after that long; 0 = run until killed)
// THREADS more threads each allocate and free a small block every 10 ms, silently.
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kEntrySize = 4096;
constexpr int kEntriesPerTick = 8;
constexpr int kStartupBlocks = 400;

std::vector<char*>* g_sessions = nullptr;  // never destroyed, like most process-wide caches

__attribute__((noinline)) char* remember_session(unsigned long id) {
    char* block = static_cast<char*>(malloc(kEntrySize));  // LINE-MARK: remember_session
    memset(block, static_cast<int>(id & 0xff), kEntrySize);
    return block;
}

__attribute__((noinline)) unsigned long transient_work(unsigned long tick) {
    char* scratch = static_cast<char*>(malloc(512 + tick % 64));
    memset(scratch, 1, 512);
    unsigned long sum = static_cast<unsigned char>(scratch[tick % 512]);
    free(scratch);
    return sum;
}

void* helper_thread(void* arg) {
    for (unsigned long i = reinterpret_cast<unsigned long>(arg);; ++i) {
        transient_work(i);
        usleep(10000);
    }
    return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
    long seconds = argc > 1 ? atol(argv[1]) : 60;
    long threads = argc > 2 ? atol(argv[2]) : 0;
    for (long t = 0; t < threads; ++t) {
        pthread_t thread;
        pthread_create(&thread, nullptr, helper_thread, reinterpret_cast<void*>(t));
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    g_sessions = new std::vector<char*>();
    g_sessions->reserve(1 << 16);  // no vector growth on the asserted stack's neighbours
    std::vector<char*> startup;
    for (int i = 0; i < kStartupBlocks; ++i) startup.push_back(static_cast<char*>(malloc(1000)));
    unsigned long id = 0;
    for (long tick = 0; seconds == 0 || tick < seconds * 10; ++tick) {
        for (int i = 0; i < kEntriesPerTick; ++i) g_sessions->push_back(remember_session(id++));
        unsigned long sum = transient_work(static_cast<unsigned long>(tick));
        if (!startup.empty()) {
            free(startup.back());
            startup.pop_back();
        }
        printf("tick %ld sessions %zu check %lu\n", tick, g_sessions->size(), sum);
        usleep(100000);
    }
    return 0;
}
