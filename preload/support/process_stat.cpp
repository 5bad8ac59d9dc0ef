#include "preload/support/process_stat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "preload/support/descriptors.h"
#include "preload/support/file_thread.h"
#include "preload/support/tracer_thread.h"

namespace growtrace::preload {

bool read_process_stat(int fd, ProcessStat& out) {
    char text[1024];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0) return false;
    text[n] = '\0';
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, the last ')' ends it.
    char* p = strrchr(text, ')');
    if (!p || p[1] != ' ' || !p[2]) return false;
    char* fields[24] = {};
    int count = 0;
    for (char* f = p + 2; *f && count < 24;) {
        fields[count++] = f;
        while (*f && *f != ' ') ++f;
        while (*f == ' ') ++f;
    }
    // Field 3 of proc(5) is fields[0]: state; 20 num_threads; 24 rss (pages).
    if (count < 22) return false;
    out.leader_state = fields[0][0];
    out.threads = strtol(fields[17], nullptr, 10);
    out.rss_pages = strtoull(fields[21], nullptr, 10);
    return true;
}

bool read_own_stat(ProcessStat& out) {
    return on_file_thread(
        [](void* into) {
            int fd = open_for_tracer("/proc/self/stat", O_RDONLY);
            if (fd < 0) return 0;
            int read = read_process_stat(fd, *static_cast<ProcessStat*>(into));
            close(fd);
            return read;
        },
        &out);
}

bool caller_alone_with_tracer_threads() {
    ProcessStat stat;
    int ours = tracer_threads_running();
    return ours > 0 && read_own_stat(stat) && stat.threads == 1 + ours;
}

bool program_has_ended(const ProcessStat& stat) {
    // A main thread that ended while other threads run stays a zombie ('Z', 'X' while it is
    // reaped) and is still counted. Any other thread beyond ours is the program's.
    if (stat.leader_state != 'Z' && stat.leader_state != 'X') return false;
    return stat.threads - 1 <= tracer_threads_running();
}

}  // namespace growtrace::preload
