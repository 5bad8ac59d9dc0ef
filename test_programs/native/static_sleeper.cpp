// Statically linked and long-running (see CMakeLists.txt): `growtrace attach` must refuse it,
// since no dynamic loader is there to load the library. usage: static_sleeper [SECONDS=30]
#include <unistd.h>

#include <cstdlib>

int main(int argc, char** argv) {
    sleep(static_cast<unsigned>(argc > 1 ? atoi(argv[1]) : 30));
    return 0;
}
