// The layouts this build has: preload/CMakeLists.txt compiles a version_3XX.cpp for every
// CPython whose headers it found, and lists them in the generated cpython_versions.h.
#include "cpython_versions.h"  // GROWTRACE_CPYTHON_VERSIONS(X), GROWTRACE_CPYTHON_VERSION_NAMES
#include "preload/cpython/layout.h"

namespace growtrace::preload::python {

#define GROWTRACE_DECLARE(minor) extern const VersionLayout kCPython3##minor;
GROWTRACE_CPYTHON_VERSIONS(GROWTRACE_DECLARE)
#undef GROWTRACE_DECLARE

const VersionLayout* version_layout(int minor) {
#define GROWTRACE_CASE(m) \
    if (minor == m) return &kCPython3##m;
    GROWTRACE_CPYTHON_VERSIONS(GROWTRACE_CASE)
#undef GROWTRACE_CASE
    return nullptr;
}

const char* supported_versions() { return GROWTRACE_CPYTHON_VERSION_NAMES; }

}  // namespace growtrace::preload::python
