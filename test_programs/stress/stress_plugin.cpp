// Loaded by `gt_stress dlclose`: allocates blocks the program keeps after the library is gone.
#include <cstdlib>

extern "C" __attribute__((noinline, visibility("default"))) void* stress_plugin_keep(unsigned long size) {
    return malloc(size);  // LINE-MARK: stress_plugin_keep
}
