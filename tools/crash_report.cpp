#include "crash_report.h"

#include "contracts/environment.h"

#define BOOST_STACKTRACE_LINK
#include <boost/stacktrace.hpp>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

namespace growtrace::cli {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

std::string g_command_line;  // built before any crash, so the handler does not allocate for it
volatile sig_atomic_t g_reporting = 0;

void write_text(const char* text) {
    for (size_t left = strlen(text); left > 0;) {
        ssize_t n = write(STDERR_FILENO, text, left);
        if (n <= 0) return;
        text += n;
        left -= static_cast<size_t>(n);
    }
}

// Async-signal-safe part first (the words and the raw frames), then the symbolized stack,
// which is not: a crash while printing it still leaves the first part on the terminal.
void report(const char* what) {
    write_text("growtrace: internal error: ");
    write_text(what);
    write_text(" in the growtrace command " GROWTRACE_VERSION " itself (not in the traced program, which is "
               "not affected)\ngrowtrace: command: ");
    write_text(g_command_line.c_str());
    write_text("\ngrowtrace: its stack:\n");
    void* frames[64];
    size_t count = boost::stacktrace::safe_dump_to(1, frames, sizeof frames);
    boost::stacktrace::stacktrace stack = boost::stacktrace::stacktrace::from_dump(frames, count * sizeof(void*));
    for (size_t i = 0; i < stack.size(); ++i) {
        std::string line = "  #" + std::to_string(i) + " " + boost::stacktrace::to_string(stack[i]) + "\n";
        write_text(line.c_str());
    }
    write_text("growtrace: please report this bug with the command line, this stack and 'growtrace --version'; "
               "attach the trace if one was being read (its path is on the command line)\n");
}

void on_crash(int signo) {
    if (!g_reporting) {
        g_reporting = 1;
        char what[64];
        snprintf(what, sizeof what, "signal %d (%s)", signo, sigabbrev_np(signo) ? sigabbrev_np(signo) : "?");
        report(what);
    }
    // Die of the same signal, as without the handler (core dump and exit status included).
    signal(signo, SIG_DFL);
    raise(signo);
}

void on_terminate() {
    std::string what = "uncaught exception";
    if (std::exception_ptr e = std::current_exception()) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            what += std::string(" (") + ex.what() + ")";
        } catch (...) {
        }
    }
    g_reporting = 1;
    report(what.c_str());
    signal(SIGABRT, SIG_DFL);
    abort();
}

}  // namespace

void install_crash_report(int argc, char** argv) {
    for (int i = 0; i < argc; ++i) g_command_line += (i ? " " : "") + std::string(argv[i]);
    static char alternate[64 * 1024];
    stack_t stack{};
    stack.ss_sp = alternate;
    stack.ss_size = sizeof alternate;
    sigaltstack(&stack, nullptr);
    struct sigaction action {};
    action.sa_handler = on_crash;
    action.sa_flags = SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (int signo : kSignals) sigaction(signo, &action, nullptr);
    std::set_terminate(on_terminate);
}

void crash_here_for_tests(const char* where) {
    const char* wanted = getenv(environment::kTestCrash);
    if (!wanted || strcmp(wanted, where) != 0) return;
    if (strcmp(where, "exception") == 0) throw std::logic_error("crash requested by GROWTRACE_TEST_CRASH");
    volatile int* nowhere = nullptr;
    *nowhere = 1;
}

}  // namespace growtrace::cli
