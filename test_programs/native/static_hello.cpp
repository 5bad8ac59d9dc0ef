// Statically linked (see CMakeLists.txt): no dynamic loader runs, so LD_PRELOAD cannot work.
#include <cstdio>

int main() {
    puts("static_hello: hello");
    return 0;
}
