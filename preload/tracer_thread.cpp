#include "preload/tracer_thread.h"

#include <pthread.h>
#include <signal.h>

namespace growtrace::preload {

int start_tracer_thread(void* (*body)(void*), void* arg) {
    // A new thread inherits the creating thread's mask: block everything around the create.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    int rc = pthread_create(&thread, &attr, body, arg);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return rc;
}

}  // namespace growtrace::preload
