// Prints known lines, optionally copies stdin to stdout, then exits with a given status or
// dies by a given signal. Used to check that tracing changes neither output nor exit status.
//
// usage: exit_with [--status N] [--signal N] [--lines N] [--cat]
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
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--status") == 0 && i + 1 < argc) {
            status = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--signal") == 0 && i + 1 < argc) {
            signo = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--lines") == 0 && i + 1 < argc) {
            lines = atol(argv[++i]);
        } else if (strcmp(argv[i], "--cat") == 0) {
            cat = true;
        } else {
            fprintf(stderr, "exit_with: unknown argument %s\n", argv[i]);
            return 64;
        }
    }
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
    if (signo > 0) {
        signal(signo, SIG_DFL);
        raise(signo);
        pause();
    }
    return status;
}
