// Prints known lines, optionally copies stdin to stdout, then exits with a given status or
// dies by a given signal. Used to check that tracing changes neither output nor exit status.
//
// usage: exit_with [--status N] [--signal N] [--lines N] [--cat] [--pid] [--keep N] [--immediate]
//   --pid prints "pid N" first (tests find the default trace name growtrace.N.gtrace).
//   --keep N allocates N blocks of 64 bytes just before the end and keeps them.
//   --immediate ends with _exit(): no atexit handlers, no destructors, no stdio flush.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
    int status = 0;
    int signo = 0;
    long lines = 3;
    bool cat = false;
    bool pid = false;
    long keep = 0;
    bool immediate = false;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--status") == 0 && i + 1 < argc) {
            status = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--signal") == 0 && i + 1 < argc) {
            signo = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--lines") == 0 && i + 1 < argc) {
            lines = atol(argv[++i]);
        } else if (strcmp(argv[i], "--pid") == 0) {
            pid = true;
        } else if (strcmp(argv[i], "--keep") == 0 && i + 1 < argc) {
            keep = atol(argv[++i]);
        } else if (strcmp(argv[i], "--immediate") == 0) {
            immediate = true;
        } else if (strcmp(argv[i], "--cat") == 0) {
            cat = true;
        } else {
            fprintf(stderr, "exit_with: unknown argument %s\n", argv[i]);
            return 64;
        }
    }
    if (pid) printf("pid %d\n", static_cast<int>(getpid()));
    for (long i = 0; i < lines; ++i) {
        std::string line = "exit_with: line " + std::to_string(i) + " of " + std::to_string(lines);
        puts(line.c_str());
    }
    if (cat) {
        char buffer[4096];
        size_t n;
        while ((n = fread(buffer, 1, sizeof buffer, stdin)) > 0) fwrite(buffer, 1, n, stdout);
    }
    fflush(stdout);
    static void* volatile kept;  // the blocks stay reachable
    for (long i = 0; i < keep; ++i) {
        void** block = static_cast<void**>(malloc(64));
        *block = kept;
        kept = block;
    }
    if (immediate) _exit(status);
    if (signo > 0) {
        signal(signo, SIG_DFL);
        raise(signo);
        pause();
    }
    return status;
}
