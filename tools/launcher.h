// Starting the traced command: PATH look-up, and a two-step spawn so that the environment
// can depend on the child's pid (the default trace name is growtrace.<pid>.gtrace).
//
//   Launcher launcher;
//   pid_t pid = launcher.start(path, argv);      // forked child waits, nothing exec'd yet
//   int err = launcher.release(env_for(pid));   // child execs with exactly `env`
//   ChildExit status = launcher.wait();          // SIGINT/SIGQUIT ignored, SIGTERM/SIGHUP forwarded
//
// stdin, stdout and stderr are inherited untouched. Not thread-safe: the CLI is one thread,
// which is also what makes the child's work between fork and exec safe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace growtrace::cli {

// Resolves a command word as execvp would: a word containing '/' is taken as a path,
// otherwise each directory of $PATH (default "/usr/local/bin:/usr/bin:/bin") is tried for a
// regular executable file. Returns nothing if none is found.
std::optional<std::string> find_in_path(const std::string& command);

struct ChildExit {
    bool signaled = false;  // killed by a signal rather than exiting
    int status = 0;         // exit status, or signal number when signaled
};

class Launcher {
public:
    Launcher() = default;
    Launcher(const Launcher&) = delete;
    Launcher& operator=(const Launcher&) = delete;
    ~Launcher();

    // Forks a child that waits for release(). Returns its pid, or -1 with errno set.
    // From here until wait() returns, SIGINT and SIGQUIT are ignored by this process (the
    // terminal delivers them to the child too) and SIGTERM and SIGHUP are forwarded to the child.
    pid_t start(const std::string& program, const std::vector<std::string>& argv);

    // Lets the child exec `program` with exactly the environment `env` ("NAME=value" strings).
    // A file without a #! line that the kernel refuses (ENOEXEC) is run by /bin/sh, as execvp
    // does. Returns 0 once the exec succeeded, otherwise the errno of the failed exec (EPIPE if
    // the child died before it could exec).
    int release(const std::vector<std::string>& env);

    // Waits for the child to end. Restores the signal dispositions that start() changed.
    ChildExit wait();

    pid_t pid() const { return pid_; }

private:
    void restore_signals();

    pid_t pid_ = -1;
    int go_fd_ = -1;     // parent's write end: the environment, then EOF
    int error_fd_ = -1;  // parent's read end: errno of a failed exec, or EOF on success
    bool signals_changed_ = false;
};

// "SIGKILL" for 9; "signal N" when the number has no name.
std::string signal_name(int signo);

}  // namespace growtrace::cli
