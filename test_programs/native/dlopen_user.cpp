// Loads libgt_plugin.so with dlopen and calls plugin_remember ROUNDS times with PER_ROUND,
// sleeping SLEEP_US between calls: ROUNDS * PER_ROUND blocks of BLOCK_SIZE (1500) bytes are
// retained, all allocated inside the plugin. The library stays loaded until exit.
//
// usage: dlopen_user [PLUGIN] [ROUNDS=100] [PER_ROUND=10] [SLEEP_US=15000] [BLOCK_SIZE=1500]
//   PLUGIN defaults to <dir of this executable>/../lib/libgt_plugin.so (the build layout).
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
    std::string plugin;
    if (argc > 1 && argv[1][0] != '\0') {
        plugin = argv[1];
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n < 0) {
            perror("dlopen_user: /proc/self/exe");
            return 1;
        }
        self[n] = '\0';
        std::string dir(self);
        dir.resize(dir.rfind('/'));
        plugin = dir + "/../lib/libgt_plugin.so";
    }
    long rounds = argc > 2 ? atol(argv[2]) : 100;
    long per_round = argc > 3 ? atol(argv[3]) : 10;
    long sleep_us = argc > 4 ? atol(argv[4]) : 15000;
    long block_size = argc > 5 ? atol(argv[5]) : 0;

    void* handle = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        fprintf(stderr, "dlopen_user: %s\n", dlerror());
        return 1;
    }
    auto remember = reinterpret_cast<void (*)(unsigned)>(dlsym(handle, "plugin_remember"));
    auto kept = reinterpret_cast<unsigned long (*)()>(dlsym(handle, "plugin_kept_count"));
    if (remember == nullptr || kept == nullptr) {
        fprintf(stderr, "dlopen_user: %s lacks plugin_remember/plugin_kept_count\n", plugin.c_str());
        return 1;
    }
    if (block_size > 0) {
        auto set_size = reinterpret_cast<void (*)(unsigned long)>(dlsym(handle, "plugin_set_block_size"));
        if (set_size == nullptr) {
            fprintf(stderr, "dlopen_user: %s lacks plugin_set_block_size\n", plugin.c_str());
            return 1;
        }
        set_size(static_cast<unsigned long>(block_size));
    }
    for (long r = 0; r < rounds; ++r) {
        remember(static_cast<unsigned>(per_round));
        if (sleep_us > 0) usleep(static_cast<useconds_t>(sleep_us));
    }
    printf("dlopen_user: plugin kept %lu blocks\n", kept());
    return 0;
}
