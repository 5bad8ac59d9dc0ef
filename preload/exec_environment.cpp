#include "preload/exec_environment.h"

#include <cstdio>
#include <cstring>

#include "contracts/environment.h"

namespace growtrace::preload {
namespace {

const char* value_of(char* const* envp, const char* name) {
    size_t n = strlen(name);
    for (char* const* e = envp; *e; ++e)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    return nullptr;
}

}  // namespace

char* const* ExecEnvironment::with_agent(char* const* envp) {
    if (!envp) return envp;
    const char* extension = value_of(envp, environment::kPyagentExt);
    // Still there: nobody consumed the launcher's settings (the process is not the Python
    // the agent started in, e.g. a shell), so they pass on as they are.
    if (!extension || value_of(envp, environment::kPythonPathOrig)) return envp;
    const char* slash = strrchr(extension, '/');
    if (!slash) return envp;
    const char* path = value_of(envp, "PYTHONPATH");
    int dir = static_cast<int>(slash - extension);
    int a = snprintf(pythonpath_, sizeof pythonpath_, "PYTHONPATH=%.*s/startup%s%s", dir, extension,
                     path && *path ? ":" : "", path && *path ? path : "");
    int b = snprintf(original_, sizeof original_, "%s=%s", environment::kPythonPathOrig, path ? path : "");
    if (a <= 0 || a >= kMaxValue || b <= 0 || b >= kMaxValue) return envp;
    int count = 0;
    for (char* const* e = envp; *e; ++e) {
        if (strncmp(*e, "PYTHONPATH=", 11) == 0) continue;
        if (count == kMaxEntries) return envp;
        entries_[count++] = *e;
    }
    entries_[count++] = pythonpath_;
    entries_[count++] = original_;
    entries_[count] = nullptr;
    return entries_;
}

}  // namespace growtrace::preload
