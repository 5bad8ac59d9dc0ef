#include "preload/record/event_buffer.h"

#include <pthread.h>
#include <sys/mman.h>

namespace growtrace::preload {
namespace {

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_returned = PTHREAD_COND_INITIALIZER;
Buffer* g_free = nullptr;
Buffer* g_full_head = nullptr;
Buffer* g_full_tail = nullptr;
size_t g_full_count = 0;
uint64_t g_next_seq = 0;
size_t g_allocated = 0;
bool g_no_wait = false;

Buffer* map_buffer() {
    void* mem = mmap(nullptr, sizeof(Buffer), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return mem == MAP_FAILED ? nullptr : static_cast<Buffer*>(mem);
}
}  // namespace

Buffer* pool_get() {
    pthread_mutex_lock(&g_mutex);
    Buffer* b = nullptr;
    for (;;) {
        if (g_free) {
            b = g_free;
            g_free = b->next;
            b->seq = g_next_seq++;
            break;
        }
        if (g_allocated < kMaxBuffers) {
            b = map_buffer();
            if (b) {
                ++g_allocated;
                b->seq = g_next_seq++;
            }
            break;
        }
        if (g_no_wait) break;
        pthread_cond_wait(&g_returned, &g_mutex);
    }
    pthread_mutex_unlock(&g_mutex);
    if (b) {
        b->next = nullptr;
        b->used = 0;
        b->stream = 0;
        b->allocations = b->frees = 0;
    }
    return b;
}

void pool_put(Buffer* buffer) {
    buffer->next = nullptr;
    pool_put_list(buffer);
}

void pool_put_list(Buffer* list) {
    if (!list) return;
    Buffer* last = list;
    while (last->next) last = last->next;
    pthread_mutex_lock(&g_mutex);
    last->next = g_free;
    g_free = list;
    pthread_cond_broadcast(&g_returned);
    pthread_mutex_unlock(&g_mutex);
}

size_t pool_queue_full(Buffer* buffer) {
    buffer->next = nullptr;
    pthread_mutex_lock(&g_mutex);
    if (g_full_tail) g_full_tail->next = buffer;
    else g_full_head = buffer;
    g_full_tail = buffer;
    size_t queued = ++g_full_count;
    pthread_mutex_unlock(&g_mutex);
    return queued;
}

size_t pool_queued() {
    pthread_mutex_lock(&g_mutex);
    size_t queued = g_full_count;
    pthread_mutex_unlock(&g_mutex);
    return queued;
}

Buffer* pool_take_full() {
    pthread_mutex_lock(&g_mutex);
    Buffer* list = g_full_head;
    g_full_head = g_full_tail = nullptr;
    g_full_count = 0;
    pthread_mutex_unlock(&g_mutex);
    return list;
}

void pool_stop_waiting() {
    pthread_mutex_lock(&g_mutex);
    g_no_wait = true;
    pthread_cond_broadcast(&g_returned);
    pthread_mutex_unlock(&g_mutex);
}

void pool_reset(SessionOrigin) {
    Buffer* full = pool_take_full();
    pthread_mutex_lock(&g_mutex);
    while (full) {
        Buffer* next = full->next;
        full->next = g_free;
        g_free = full;
        full = next;
    }
    g_no_wait = false;
    pthread_mutex_unlock(&g_mutex);
}

void pool_release() {
    if (Buffer* full = pool_take_full()) pool_put_list(full);
    pthread_mutex_lock(&g_mutex);
    while (Buffer* b = g_free) {
        g_free = b->next;
        munmap(b, sizeof(Buffer));
        --g_allocated;
    }
    pthread_mutex_unlock(&g_mutex);
}

void pool_prepare_fork() { pthread_mutex_lock(&g_mutex); }
void pool_parent_after_fork() { pthread_mutex_unlock(&g_mutex); }
void pool_child_after_fork() {
    pthread_mutex_unlock(&g_mutex);
    pthread_cond_init(&g_returned, nullptr);
}

}  // namespace growtrace::preload
