#include "launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace growtrace::cli {

namespace {

bool is_executable_file(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// The pid signal handlers forward to; 0 when no child is running.
volatile sig_atomic_t g_forward_pid = 0;

void forward_signal(int signo) {
    pid_t pid = g_forward_pid;
    if (pid > 0) kill(pid, signo);
}

struct SavedSignal {
    int signo;
    struct sigaction old;
};
SavedSignal g_saved[] = {{SIGINT, {}}, {SIGQUIT, {}}, {SIGTERM, {}}, {SIGHUP, {}}};

bool write_all(int fd, const char* data, size_t size) {
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        data += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

// Child side of start(): read the environment, exec. Never returns.
[[noreturn]] void child_main(int go_fd, int error_fd, const std::string& program,
                             const std::vector<std::string>& argv) {
    std::string blob;
    char buffer[4096];
    for (;;) {
        ssize_t n = read(go_fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        blob.append(buffer, static_cast<size_t>(n));
    }
    close(go_fd);
    if (blob.empty()) _exit(127);  // the parent gave up on us

    // blob = "NAME=value\0NAME=value\0...\0" followed by one more '\0' marking completeness.
    if (blob.back() != '\0' || blob.size() < 1) _exit(127);
    std::vector<char*> envp;
    for (size_t i = 0; i + 1 < blob.size();) {
        envp.push_back(&blob[i]);
        i += strlen(&blob[i]) + 1;
    }
    envp.push_back(nullptr);

    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);

    execve(program.c_str(), args.data(), envp.data());
    int err = errno;
    if (err == ENOEXEC) {
        // No #! line: run it with the shell, as execvp does.
        std::vector<char*> sh_args;
        sh_args.push_back(const_cast<char*>("/bin/sh"));
        sh_args.push_back(const_cast<char*>(program.c_str()));
        for (size_t i = 1; i < argv.size(); ++i) sh_args.push_back(const_cast<char*>(argv[i].c_str()));
        sh_args.push_back(nullptr);
        execve("/bin/sh", sh_args.data(), envp.data());
        err = ENOEXEC;
    }
    (void)!write(error_fd, &err, sizeof err);
    _exit(127);
}

}  // namespace

std::optional<std::string> find_in_path(const std::string& command) {
    if (command.empty()) return std::nullopt;
    if (command.find('/') != std::string::npos) {
        if (is_executable_file(command)) return command;
        return std::nullopt;
    }
    const char* env_path = getenv("PATH");
    std::string path = env_path ? env_path : "/usr/local/bin:/usr/bin:/bin";
    size_t begin = 0;
    for (;;) {
        size_t end = path.find(':', begin);
        std::string dir = path.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
        if (dir.empty()) dir = ".";  // an empty PATH entry means the current directory
        std::string candidate = dir + "/" + command;
        if (is_executable_file(candidate)) return candidate;
        if (end == std::string::npos) break;
        begin = end + 1;
    }
    return std::nullopt;
}

Launcher::~Launcher() {
    if (go_fd_ >= 0) close(go_fd_);  // an unreleased child reads EOF and exits 127
    if (error_fd_ >= 0) close(error_fd_);
    if (pid_ > 0) {
        int status;
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
    }
    restore_signals();
}

pid_t Launcher::start(const std::string& program, const std::vector<std::string>& argv) {
    int go[2];
    int err[2];
    if (pipe2(go, O_CLOEXEC) != 0) return -1;
    if (pipe2(err, O_CLOEXEC) != 0) {
        int saved = errno;
        close(go[0]);
        close(go[1]);
        errno = saved;
        return -1;
    }
    fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(go[0]);
        close(go[1]);
        close(err[0]);
        close(err[1]);
        errno = saved;
        return -1;
    }
    if (pid == 0) {
        close(go[1]);
        close(err[0]);
        child_main(go[0], err[1], program, argv);
    }
    close(go[0]);
    close(err[1]);
    pid_ = pid;
    go_fd_ = go[1];
    error_fd_ = err[0];

    // Like time(1): the terminal's interrupt goes to the child, which decides; we stay to
    // report. Termination requests addressed to us are passed on.
    g_forward_pid = pid;
    for (SavedSignal& s : g_saved) {
        struct sigaction action {};
        sigemptyset(&action.sa_mask);
        action.sa_handler = (s.signo == SIGINT || s.signo == SIGQUIT) ? SIG_IGN : forward_signal;
        sigaction(s.signo, &action, &s.old);
    }
    signals_changed_ = true;
    return pid;
}

int Launcher::release(const std::vector<std::string>& env) {
    std::string blob;
    for (const std::string& e : env) {
        blob += e;
        blob += '\0';
    }
    blob += '\0';

    // The child may already be gone (killed by a forwarded signal): no SIGPIPE for us.
    struct sigaction ignore {};
    struct sigaction old_pipe {};
    sigemptyset(&ignore.sa_mask);
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &old_pipe);
    bool written = write_all(go_fd_, blob.data(), blob.size());
    int write_errno = errno;
    close(go_fd_);
    go_fd_ = -1;
    sigaction(SIGPIPE, &old_pipe, nullptr);
    if (!written) return write_errno;

    int exec_errno = 0;
    ssize_t n;
    do {
        n = read(error_fd_, &exec_errno, sizeof exec_errno);
    } while (n < 0 && errno == EINTR);
    close(error_fd_);
    error_fd_ = -1;
    return n == static_cast<ssize_t>(sizeof exec_errno) ? exec_errno : 0;
}

ChildExit Launcher::wait() {
    ChildExit result;
    if (pid_ <= 0) return result;
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0) {
        if (errno != EINTR) {
            status = 0;
            break;
        }
    }
    pid_ = -1;
    g_forward_pid = 0;
    restore_signals();
    if (WIFSIGNALED(status)) {
        result.signaled = true;
        result.status = WTERMSIG(status);
    } else {
        result.status = WEXITSTATUS(status);
    }
    return result;
}

void Launcher::restore_signals() {
    if (!signals_changed_) return;
    for (SavedSignal& s : g_saved) sigaction(s.signo, &s.old, nullptr);
    signals_changed_ = false;
}

std::string signal_name(int signo) {
    const char* abbrev = sigabbrev_np(signo);
    if (abbrev == nullptr) return "signal " + std::to_string(signo);
    return std::string("SIG") + abbrev;
}

}  // namespace growtrace::cli
