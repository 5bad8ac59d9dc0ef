#include "preload/intercept/exec_environment.h"

#include <cstdio>
#include <cstring>

#include "contracts/environment.h"

namespace growtrace::preload {
namespace {

bool named(const char* entry, const char* name) {
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

const char* value_of(char* const* envp, const char* name) {
    for (char* const* e = envp; *e; ++e)
        if (named(*e, name)) return *e + strlen(name) + 1;
    return nullptr;
}

// The entries `growtrace run` sets for a traced image (the CPython agent's are with_agent's).
bool set_by_run(const char* entry) {
    static const char* const kNames[] = {"LD_PRELOAD",
                                         environment::kOutput,
                                         environment::kFollowExec,
                                         environment::kFollowFork,
                                         environment::kPythonObjects,
                                         environment::kSample,
                                         environment::kPyagentExt,
                                         environment::kPythonPathOrig,
                                         environment::kLaunchers};
    for (const char* name : kNames)
        if (named(entry, name)) return true;
    return false;
}

}  // namespace

char* const* ExecEnvironment::with_tracer(char* const* envp, const TracedImageSettings& settings) {
    if (!envp) return envp;
    const char* preload = value_of(envp, "LD_PRELOAD");
    bool more = preload && *preload;
    int a = snprintf(preload_, sizeof preload_, "LD_PRELOAD=%s%s%s", settings.library, more ? ":" : "",
                     more ? preload : "");
    int b = snprintf(output_, sizeof output_, "%s=%s", environment::kOutput, settings.output);
    snprintf(sample_, sizeof sample_, "%s=%llu", environment::kSample,
             static_cast<unsigned long long>(settings.sample_bytes));
    int c = snprintf(extension_, sizeof extension_, "%s=%s", environment::kPyagentExt, settings.agent_extension);
    int d = snprintf(launchers_, sizeof launchers_, "%s=%s", environment::kLaunchers, settings.launchers);
    if (a <= 0 || a >= kMaxValue || b <= 0 || b >= kMaxPath || c <= 0 || c >= kMaxPath || d <= 0 || d >= kMaxValue)
        return envp;
    int count = 0;
    for (char* const* e = envp; *e; ++e) {
        if (set_by_run(*e)) continue;
        if (count == kMaxEntries) return envp;
        entries_[count++] = *e;
    }
    entries_[count++] = preload_;
    entries_[count++] = output_;
    entries_[count++] = sample_;
    if (*settings.agent_extension) entries_[count++] = extension_;
    if (*settings.launchers) entries_[count++] = launchers_;
    entries_[count] = nullptr;
    // with_agent() filters entries_ in place (it writes no further than it has read) and adds
    // its two entries: they fit in kAdded.
    return with_agent(entries_);
}

char* const* ExecEnvironment::with_image(char* const* envp, const char* output, const char* launchers) {
    if (!envp || !*output) return with_agent(envp);
    int a = snprintf(output_, sizeof output_, "%s=%s", environment::kOutput, output);
    int b = snprintf(launchers_, sizeof launchers_, "%s=%s", environment::kLaunchers, launchers);
    if (a <= 0 || a >= kMaxPath || b <= 0 || b >= kMaxValue) return with_agent(envp);
    int count = 0;
    for (char* const* e = envp; *e; ++e) {
        if (named(*e, environment::kOutput) || named(*e, environment::kLaunchers)) continue;
        if (count == kMaxEntries) return with_agent(envp);
        entries_[count++] = *e;
    }
    entries_[count++] = output_;
    if (*launchers) entries_[count++] = launchers_;
    entries_[count] = nullptr;
    return with_agent(entries_);
}

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
