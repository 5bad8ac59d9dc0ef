// The environment an exec'd program gets from a traced Python process. The agent's
// sitecustomize takes its start-up folder off PYTHONPATH so that the program sees its own; an
// exec'd Python (os.execv, subprocess) would then start without the agent, traced but with no
// cache or class records. This puts the folder back, as the launcher had set it.
#pragma once

namespace growtrace::preload {

class ExecEnvironment {
public:
    // envp, or a copy in this object's storage with PYTHONPATH and GROWTRACE_PYTHONPATH_ORIG
    // set as `growtrace run` sets them. Allocates nothing (exec may run in a vfork child).
    char* const* with_agent(char* const* envp);

private:
    static constexpr int kMaxEntries = 4096;  // a larger environment is passed on unchanged
    static constexpr int kMaxValue = 8192;
    char* entries_[kMaxEntries + 3];
    char pythonpath_[kMaxValue];
    char original_[kMaxValue];
};

}  // namespace growtrace::preload
