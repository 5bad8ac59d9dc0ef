// Loaded by `gt_stress dlclose`: allocates blocks the program keeps after the library is gone.
#include <cstdlib>

extern "C" __attribute__((noinline, visibility("default"))) void* stress_plugin_keep(unsigned long size) {
    return malloc(size);  // LINE-MARK: stress_plugin_keep
}

// What this library's GOT holds for malloc: an attached tracer redirects it.
extern "C" __attribute__((visibility("default"))) void* stress_plugin_malloc_slot() {
    return reinterpret_cast<void*>(&malloc);
}
