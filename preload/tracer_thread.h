// The tracer's own threads (writer, attach rescanner): detached, and started with every signal
// blocked so that the program's signals are never delivered to them.
#pragma once

namespace growtrace::preload {

// pthread_create's result: 0, or an errno value.
int start_tracer_thread(void* (*body)(void*), void* arg);

}  // namespace growtrace::preload
