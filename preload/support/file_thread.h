// The tracer's file work (appending a block to the trace, reading /proc/self/stat) is done on a
// thread of its own whose descriptor table is its own too, empty of the program's descriptors.
// So no descriptor of the tracer ever appears in the program's table, not even for the moment
// an open lasts: a program that scans its descriptors (CPython's fd_status.py under
// subprocess's pass_fds), lists /proc/self/fd, dup2()s onto a free number or counts on getting
// the lowest free number back sees only its own, whatever the tracer is doing at that moment.
//
// Why a thread apart from the writer: the writer keeps the program's table, because when the
// program's last thread ends without exit() the writer runs exit() in its place
// (tracer_thread.h), and the program's atexit handlers and stdio buffers need the program's
// descriptors then. The file thread lives inside the writer's lifetime (started just before it,
// stopped by it as it leaves), so parking the writer for a fork parks both.
//
// Where the kernel cannot give a thread a table of its own (close_range with
// CLOSE_RANGE_UNSHARE needs Linux 5.9; a seccomp policy may refuse it), the thread ends at once
// and the work runs on the calling thread, in the program's table, as briefly as before
// (descriptors.h).
#pragma once

namespace growtrace::preload {

// Starts the file thread and waits until it serves or has given up. Called where the writer is
// started, by the thread that starts it: glibc's thread creation allocates in the creating
// thread, and the writer, which has not allocated yet, would get an arena of its own for it (a
// failed attach would leave it behind).
void file_thread_start();
// Stops it and waits until the kernel no longer counts it: by the writer as it leaves, or by
// the starter when the writer could not start.
void file_thread_stop();
// Runs work(arg) on the file thread when it serves, else on the calling thread; its result.
// One piece of work at a time, from any thread of the tracer.
int on_file_thread(int (*work)(void*), void* arg);
// In a forked child, where the parent's file thread does not exist.
void file_thread_forget_after_fork();

}  // namespace growtrace::preload
