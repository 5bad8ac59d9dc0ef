// Calls every allocation function growtrace hooks, and keeps exactly one block from each, each
// allocated in its own noinline function with its own size, so a test can check every hook's
// bytes separately. Every function is also used once for a block that is freed again, with
// every way of freeing (free, realloc, delete, delete[], sized and aligned delete).
//
// Every kept block, and each seed, is above 64 KiB: the analyzer reports only allocation
// stacks that held at least that much at some time.
//
//   function               kept by                  bytes
//   malloc                 keep_malloc              100001
//   calloc                 keep_calloc              100002 (2 x 50001)
//   realloc (grow)         keep_realloc             100003 (its 70000-byte seed from realloc_seed is freed by it)
//   reallocarray (grow)    keep_reallocarray        100004 (4 x 25001; 70000-byte seed from reallocarray_seed)
//   posix_memalign         keep_posix_memalign      100005
//   valloc                 keep_valloc              100006
//   memalign               keep_memalign            100007
//   aligned_alloc          keep_aligned_alloc       100016 (a multiple of the alignment, 16)
//   operator new           keep_new                 100009
//   operator new[]         keep_new_array           100010
//   operator new(nothrow)  keep_new_nothrow         100011
//   pvalloc                keep_pvalloc             102400 (25 pages: no rounding)
//   operator new(align)    keep_new_aligned         100032 (alignment 64)
//   operator new[](align)  keep_new_aligned_array   200064 (two 100032-byte elements)
//
// usage: all_hooks
#include <malloc.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <new>

namespace {

struct Blob100009 {
    char data[100009];
};
struct alignas(64) Aligned100032 {
    char data[100032];
};

void* volatile g_sink;  // defeats elision of allocation/free pairs
void* g_kept[14];

__attribute__((noinline)) void* keep_malloc() { return malloc(100001); }
__attribute__((noinline)) void* keep_calloc() { return calloc(2, 50001); }
__attribute__((noinline)) void* realloc_seed() { return malloc(70000); }
__attribute__((noinline)) void* keep_realloc(void* seed) { return realloc(seed, 100003); }
__attribute__((noinline)) void* reallocarray_seed() { return malloc(70000); }
__attribute__((noinline)) void* keep_reallocarray(void* seed) { return reallocarray(seed, 4, 25001); }
__attribute__((noinline)) void* keep_posix_memalign() {
    void* p = nullptr;
    return posix_memalign(&p, 64, 100005) == 0 ? p : nullptr;
}
__attribute__((noinline)) void* keep_valloc() { return valloc(100006); }
__attribute__((noinline)) void* keep_memalign() { return memalign(128, 100007); }
__attribute__((noinline)) void* keep_aligned_alloc() { return aligned_alloc(16, 100016); }
__attribute__((noinline)) void* keep_new() { return new Blob100009; }
__attribute__((noinline)) void* keep_new_array() { return new char[100010]; }
__attribute__((noinline)) void* keep_new_nothrow() { return ::operator new(100011, std::nothrow); }
__attribute__((noinline)) void* keep_pvalloc() { return pvalloc(102400); }
__attribute__((noinline)) void* keep_new_aligned() { return new Aligned100032; }
__attribute__((noinline)) void* keep_new_aligned_array() { return new Aligned100032[2]; }

// Allocates with every function and frees with the matching deallocation.
__attribute__((noinline)) void churn_all() {
    void* p;
    g_sink = p = malloc(100);
    free(p);
    g_sink = p = calloc(10, 10);
    free(p);
    g_sink = p = realloc(nullptr, 100);  // realloc as malloc
    g_sink = p = realloc(p, 200);        // moves or grows
    free(p);
    g_sink = p = reallocarray(nullptr, 10, 10);
    free(p);
    if (posix_memalign(&p, 32, 100) == 0) {
        g_sink = p;
        free(p);
    }
    g_sink = p = valloc(100);
    free(p);
    g_sink = p = memalign(64, 100);
    free(p);
    g_sink = p = aligned_alloc(64, 128);
    free(p);
    g_sink = p = pvalloc(100);
    free(p);
    Blob100009* blob = new Blob100009;
    g_sink = blob;
    delete blob;
    char* array = new char[100];
    g_sink = array;
    delete[] array;
    g_sink = p = ::operator new(100);
    ::operator delete(p, 100);  // sized delete
    g_sink = p = ::operator new(100, std::nothrow);
    ::operator delete(p, std::nothrow);
    Aligned100032* aligned = new Aligned100032;
    g_sink = aligned;
    delete aligned;
    Aligned100032* aligned_array = new Aligned100032[3];
    g_sink = aligned_array;
    delete[] aligned_array;
    g_sink = p = realloc(malloc(50), 0);  // glibc frees the block and returns NULL
    free(p);
}

}  // namespace

int main() {
    churn_all();
    int i = 0;
    g_kept[i++] = keep_malloc();
    g_kept[i++] = keep_calloc();
    g_kept[i++] = keep_realloc(realloc_seed());
    g_kept[i++] = keep_reallocarray(reallocarray_seed());
    g_kept[i++] = keep_posix_memalign();
    g_kept[i++] = keep_valloc();
    g_kept[i++] = keep_memalign();
    g_kept[i++] = keep_aligned_alloc();
    g_kept[i++] = keep_new();
    g_kept[i++] = keep_new_array();
    g_kept[i++] = keep_new_nothrow();
    g_kept[i++] = keep_pvalloc();
    g_kept[i++] = keep_new_aligned();
    g_kept[i++] = keep_new_aligned_array();
    int missing = 0;
    for (void* p : g_kept) {
        if (p == nullptr) ++missing;
        else memset(p, 0x5a, 16);
    }
    printf("all_hooks: kept %d blocks\n", i - missing);
    return missing == 0 ? 0 : 1;
}
