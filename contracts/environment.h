// Every environment variable growtrace reads or writes, named once. The preload library reads
// its configuration from them (preload/support/config.cpp), `growtrace run` writes them for the traced
// command (tools/cmd_run.cpp), the preload library passes the CPython agent's on across exec
// (preload/intercept/exec_environment.cpp), and the agent's startup code reads and removes its own
// (pyagent/startup/*.py, which cannot include this header: tests/unit/contracts_test.cpp fails
// when a Python or shell file names a GROWTRACE_ variable missing from kVariables).
// Header-only, no allocation: the preload library includes it.
#pragma once

#include <string_view>

namespace growtrace::environment {

// The tracer's configuration (preload/support/config.cpp).
inline constexpr char kOutput[] = "GROWTRACE_OUTPUT";
inline constexpr char kFollowFork[] = "GROWTRACE_FOLLOW_FORK";
inline constexpr char kFollowExec[] = "GROWTRACE_FOLLOW_EXEC";
inline constexpr char kPythonObjects[] = "GROWTRACE_PYTHON_OBJECTS";
inline constexpr char kSample[] = "GROWTRACE_SAMPLE";
inline constexpr char kTickMs[] = "GROWTRACE_TICK_MS";
inline constexpr char kVerifyStacks[] = "GROWTRACE_VERIFY_STACKS";
inline constexpr char kUnwind[] = "GROWTRACE_UNWIND";
inline constexpr char kParentTrace[] = "GROWTRACE_PARENT_TRACE";
// The images an exec'd image was launched through (preload/session/session.cpp, before_exec).
inline constexpr char kLaunchers[] = "GROWTRACE_LAUNCHERS";
inline constexpr char kLauncherArgumentSeparator = '\x1f';  // between one launcher's arguments
inline constexpr char kLauncherSeparator[] = "\x1e";        // between launchers
// The CPython agent's start-up (pyagent/startup/sitecustomize.py).
inline constexpr char kPythonPathOrig[] = "GROWTRACE_PYTHONPATH_ORIG";
inline constexpr char kPyagentExt[] = "GROWTRACE_PYAGENT_EXT";
inline constexpr char kPyagentLog[] = "GROWTRACE_PYAGENT_LOG";
inline constexpr char kPyagent[] = "GROWTRACE_PYAGENT";
inline constexpr char kContainers[] = "GROWTRACE_CONTAINERS";
inline constexpr char kContainerPeriod[] = "GROWTRACE_CONTAINER_PERIOD";
inline constexpr char kContainerShare[] = "GROWTRACE_CONTAINER_SHARE";
// The `growtrace` command's own.
inline constexpr char kPreload[] = "GROWTRACE_PRELOAD";
inline constexpr char kPyagentDir[] = "GROWTRACE_PYAGENT_DIR";
inline constexpr char kGdbLog[] = "GROWTRACE_GDB_LOG";
inline constexpr char kTestCrash[] = "GROWTRACE_TEST_CRASH";
// Set by the tests in a process they attach to (read by the library, preload/intercept/attach.cpp).
inline constexpr char kTestAttachFail[] = "GROWTRACE_TEST_ATTACH_FAIL";
// The scripts of tools/ and the Python tests.
inline constexpr char kBuildDir[] = "GROWTRACE_BUILD_DIR";
inline constexpr char kTestPip[] = "GROWTRACE_TEST_PIP";
inline constexpr char kDemoPython[] = "GROWTRACE_DEMO_PYTHON";
inline constexpr char kPython[] = "GROWTRACE_PYTHON";

struct Variable {
    const char* name;
    const char* meaning;
    const char* set_by;
    const char* read_by;
    // `growtrace run` sets it for the traced command, replacing any value the command would
    // have inherited.
    bool set_by_run;
};

inline constexpr Variable kVariables[] = {
    {kOutput, "trace path of the process that loads the library (default growtrace.PID.gtrace)",
     "growtrace run / check (-o)", "preload (config.cpp; attach.cpp: unset means loaded for attach)", true},
    {kFollowFork, "0: forked children run untraced (default 1)", "growtrace run --no-follow-fork", "preload", true},
    {kFollowExec, "0: exec'd images run untraced (default 1)", "growtrace run --no-follow-exec", "preload", true},
    {kPythonObjects, "0: no PEP 445 hooks on CPython's allocators (default 1)", "growtrace run --no-python-objects",
     "preload", true},
    {kSample, "bytes between samples on average, K/M/G accepted (default 0: every allocation)",
     "growtrace run / check --sample", "preload", true},
    {kTickMs, "period of time marks and flushes, 10-10000 ms (default 100)", "the user, tests", "preload", false},
    {kUnwind,
     "libunwind: every native stack unwound by libunwind, without the tracer's table of unwind rules "
     "(preload/capture/cfi_unwinder.h; for comparisons)",
     "the user, benchmarks, tests", "preload (unwinder.cpp)", false},
    {kVerifyStacks, "1: each Python stack captured is also walked whole, differences logged at the end",
     "tests", "preload", false},
    {kParentTrace, "the parent's trace, written into the Process record", "nothing in growtrace (the user)",
     "preload (recorder.cpp)", false},
    {kLaunchers,
     "the images before this one in its exec chain (a shim, env, a shell...), each its command line: arguments "
     "separated by 0x1F, images by 0x1E; written into the Process record",
     "preload (before an exec)", "preload (session.cpp, removes it at start)", true},
    {kPythonPathOrig, "the program's PYTHONPATH before the agent's startup directory was put first",
     "growtrace run; preload across exec (exec_environment.cpp)",
     "sitecustomize.py (restores and removes it), exec_environment.cpp", true},
    {kPyagentExt, "path of the agent's C extension built for this CPython version", "growtrace run",
     "sitecustomize.py, exec_environment.cpp", true},
    {kPyagentLog, "JSON-lines log of the agent's records (no tracer needed)", "pyagent/tests", "sitecustomize.py",
     false},
    {kPyagent, "0: the agent does not start (sitecustomize is still chained)", "the user", "sitecustomize.py", false},
    {kContainers, "0: the agent does not walk the program's containers (default 1, docs/containers.md)",
     "the user, benchmarks", "growtrace-agent.py", false},
    {kContainerPeriod, "least seconds between two container walks (default 0.25)", "the user, tests",
     "growtrace-agent.py", false},
    {kContainerShare,
     "most CPU time the container walks take, as a share of the time after each (default 0.01: a walk of "
     "t seconds is followed by at least 100 t without one)",
     "the user, tests", "growtrace-agent.py", false},
    {kPreload, "path of libgrowtrace.so (default <dir of growtrace>/../lib/libgrowtrace.so)", "the user, tests",
     "growtrace (paths.cpp)", false},
    {kPyagentDir, "directory of the CPython agent (default beside the library)", "the user, tests",
     "growtrace (paths.cpp)", false},
    {kGdbLog, "file that everything gdb printed during attach/detach is appended to", "the user",
     "growtrace attach / detach", false},
    {kTestCrash, "start|exception|run-wait: the command crashes there on purpose", "tests",
     "growtrace (crash_report.cpp)", false},
    {kTestAttachFail, "begin|patch: growtrace attach fails there on purpose in the process that has it", "tests",
     "preload (attach.cpp)", false},
    {kBuildDir, "build directory (default build/)", "the user", "tools/*.sh, pyagent/tests", false},
    {kTestPip, "1: tools/test.sh also runs the pip installs (label pip, ten minutes each)", "the user",
     "tools/test.sh", false},
    {kDemoPython, "CPython version the demo runs (default 3.11)", "the user", "tools/demo.sh", false},
    {kPython, "a CPython 3.11 with a shared libpython for the project's venv", "the user",
     "tools/setup_python.sh", false},
};

constexpr const Variable* find(std::string_view name) {
    for (const Variable& v : kVariables)
        if (name == v.name) return &v;
    return nullptr;
}

}  // namespace growtrace::environment
