// An attach target whose growth is made inside libc: every tick (100 ms, "tick N" printed) it
// keeps blocks that libc allocated on its behalf (strdup, asprintf, open_memstream's buffer,
// getline's line, and a getline that grows a block the program allocated itself), keeps one
// block of its own (malloc), and does transient libc work (qsort of a large array, fopen /
// fclose, opendir / closedir). It also frees, one per tick, a strdup'ed block made before its
// first tick: when attached after start-up, that free matches nothing traced.
//
// usage: libc_internal [SECONDS=60]   (0 = run until killed)
// Each tick keeps, allocated inside libc: kStrdups x kLineBytes + kAsprintfs x (kLineBytes)
// + one memstream of kLineBytes + kGetlines lines of kLineBytes (and a grown line); that is
// about 20 KB per tick, and kOwnBytes allocated by the program.
#define _GNU_SOURCE 1
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kLineBytes = 2000;
constexpr int kStrdups = 4;
constexpr int kAsprintfs = 2;
constexpr int kGetlines = 2;
constexpr size_t kOwnBytes = 4096;
constexpr int kStartupBlocks = 400;

std::vector<void*>* g_kept = nullptr;  // never destroyed

char g_line[kLineBytes];

__attribute__((noinline)) void keep_strdups() {
    for (int i = 0; i < kStrdups; ++i) g_kept->push_back(strdup(g_line));  // LINE-MARK: strdup
}

__attribute__((noinline)) void keep_asprintfs(long tick) {
    for (int i = 0; i < kAsprintfs; ++i) {
        char* text = nullptr;
        if (asprintf(&text, "%ld %.*s", tick, static_cast<int>(kLineBytes - 32), g_line) >= 0) g_kept->push_back(text);
    }
}

__attribute__((noinline)) void keep_memstream() {
    char* buffer = nullptr;
    size_t size = 0;
    FILE* f = open_memstream(&buffer, &size);
    if (!f) return;
    fwrite(g_line, 1, kLineBytes - 1, f);
    fclose(f);
    g_kept->push_back(buffer);
}

__attribute__((noinline)) void keep_getlines() {
    std::string text;
    for (int i = 0; i < kGetlines + 1; ++i) text.append(g_line, kLineBytes - 2).push_back('\n');
    FILE* f = fmemopen(text.data(), text.size(), "r");
    if (!f) return;
    for (int i = 0; i < kGetlines; ++i) {
        char* line = nullptr;
        size_t capacity = 0;
        if (getline(&line, &capacity, f) > 0) g_kept->push_back(line);
        else free(line);
    }
    // A block of the program's that libc grows (frees and reallocates) inside getline.
    size_t capacity = 16;
    char* line = static_cast<char*>(malloc(capacity));
    if (getline(&line, &capacity, f) > 0) g_kept->push_back(line);
    else free(line);
    fclose(f);
}

__attribute__((noinline)) void keep_own() {
    g_kept->push_back(malloc(kOwnBytes));  // LINE-MARK: own
}

int compare(const void* a, const void* b) {
    int x = *static_cast<const int*>(a), y = *static_cast<const int*>(b);
    return (x > y) - (x < y);
}

__attribute__((noinline)) unsigned long transient_libc_work(long tick) {
    static int numbers[20000];
    for (int i = 0; i < 20000; ++i) numbers[i] = static_cast<int>((i * 7919 + tick) % 20011);
    qsort(numbers, 20000, sizeof numbers[0], compare);
    unsigned long sum = static_cast<unsigned long>(numbers[tick % 20000]);
    if (FILE* f = fopen("/proc/self/stat", "r")) {
        sum += static_cast<unsigned long>(fgetc(f));
        fclose(f);
    }
    if (DIR* d = opendir("/")) {
        while (readdir(d)) ++sum;
        closedir(d);
    }
    return sum;
}

}  // namespace

int main(int argc, char** argv) {
    long seconds = argc > 1 ? atol(argv[1]) : 60;
    setvbuf(stdout, nullptr, _IOLBF, 0);
    memset(g_line, 'x', sizeof g_line - 1);
    g_kept = new std::vector<void*>();
    g_kept->reserve(1 << 20);
    std::vector<char*> startup;
    for (int i = 0; i < kStartupBlocks; ++i) startup.push_back(strdup(g_line));
    for (long tick = 0; seconds == 0 || tick < seconds * 10; ++tick) {
        keep_strdups();
        keep_asprintfs(tick);
        keep_memstream();
        keep_getlines();
        keep_own();
        unsigned long sum = transient_libc_work(tick);
        if (!startup.empty()) {
            free(startup.back());
            startup.pop_back();
        }
        printf("tick %ld kept %zu check %lu\n", tick, g_kept->size(), sum % 1000);
        usleep(100000);
    }
    return 0;
}
