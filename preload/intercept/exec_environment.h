// The environment an exec'd program gets from a traced Python process. The agent's
// sitecustomize takes its start-up folder off PYTHONPATH so that the program sees its own; an
// exec'd Python (os.execv, subprocess) would then start without the agent, traced but with no
// cache or class records. This puts the folder back, as the launcher had set it.
//
// An attached process (`growtrace attach`) has none of `growtrace run`'s settings in its
// environment: an image it execs gets them here, so that it is traced as under run.
#pragma once

#include <cstdint>

namespace growtrace::preload {

// What `growtrace run` would have set for a traced image.
struct TracedImageSettings {
    const char* library;          // preloaded first
    const char* output;           // GROWTRACE_OUTPUT: the exec'd image writes <stem>.exec<N>.gtrace
    uint64_t sample_bytes;        // GROWTRACE_SAMPLE
    const char* agent_extension;  // GROWTRACE_PYAGENT_EXT, "" for none
    const char* launchers = "";   // GROWTRACE_LAUNCHERS, "" for none
};

class ExecEnvironment {
public:
    // envp, or a copy in this object's storage with PYTHONPATH and GROWTRACE_PYTHONPATH_ORIG
    // set as `growtrace run` sets them. Allocates nothing (exec may run in a vfork child).
    char* const* with_agent(char* const* envp);
    // envp with the entries `growtrace run` sets for a traced image, from `settings` (LD_PRELOAD
    // names the library first, then what it named before), then with_agent(). envp when
    // anything does not fit.
    char* const* with_tracer(char* const* envp, const TracedImageSettings& settings);
    // envp with GROWTRACE_OUTPUT set to `output` (the exec'd image's trace) and
    // GROWTRACE_LAUNCHERS to `launchers` (none if ""), then with_agent(). with_agent(envp)
    // when `output` is "" or anything does not fit.
    char* const* with_image(char* const* envp, const char* output, const char* launchers);

private:
    static constexpr int kMaxEntries = 4096;  // a larger environment is passed on unchanged
    static constexpr int kMaxValue = 8192;
    static constexpr int kAdded = 8;  // at most: with_tracer's entries, then with_agent's
    char* entries_[kMaxEntries + kAdded + 1];
    char pythonpath_[kMaxValue];
    char original_[kMaxValue];
    static constexpr int kMaxPath = 4200;  // a path and its variable's name
    char preload_[kMaxValue];
    char output_[kMaxPath];
    char sample_[48];
    char extension_[kMaxPath];
    char launchers_[kMaxValue];
};

}  // namespace growtrace::preload
