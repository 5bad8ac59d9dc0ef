// Forks and execs, so that each process image gets its own trace:
//   1. parent_keep keeps 10 blocks of 10000 bytes in this process;
//   2. a forked child keeps 100 blocks of 2000 bytes (child_keep) and exits normally;
//   3. after the child has exited, this process execs PROGRAM ARGS... (if given).
// The exit status is the exec'd program's, or 0 (1 if the child failed).
//
// (Each kept total is above 64 KiB, the least the analyzer reports for a stack.)
//
// usage: fork_exec [PROGRAM [ARGS...]]
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void* g_parent_blocks[10];
void* g_child_blocks[100];

__attribute__((noinline)) void parent_keep() {
    for (void*& block : g_parent_blocks) {
        block = malloc(10000);  // LINE-MARK: parent_keep
        memset(block, 1, 10000);
    }
}

__attribute__((noinline)) void child_keep() {
    for (void*& block : g_child_blocks) {
        block = malloc(2000);  // LINE-MARK: child_keep
        memset(block, 2, 2000);
    }
}

}  // namespace

int main(int argc, char** argv) {
    parent_keep();
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork_exec: fork");
        return 1;
    }
    if (pid == 0) {
        child_keep();
        usleep(150000);
        printf("fork_exec: child %d kept 100 blocks of 2000 bytes\n", static_cast<int>(getpid()));
        exit(0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "fork_exec: child failed (status 0x%x)\n", status);
        return 1;
    }
    printf("fork_exec: parent kept 10 blocks of 10000 bytes\n");
    if (argc < 2) return 0;
    fflush(stdout);
    execv(argv[1], argv + 1);
    fprintf(stderr, "fork_exec: cannot exec %s: %s\n", argv[1], strerror(errno));
    return 127;
}
