// Attach mode (see attach.h): start and stop a trace in a process the library was injected
// into. Starting opens the trace and then redirects the allocation functions of every loaded
// object to our hooks through their GOT; a helper thread patches objects loaded later.
// Stopping puts the GOT back first, then ends the trace, so no hook call can still be
// recording into it after it is closed except those already under way.
#include "preload/intercept/attach.h"

#include "preload/support/tracer_thread.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "contracts/environment.h"
#include "contracts/status_codes.h"
#include "preload/support/got_patcher.h"
#include "preload/intercept/hook_list.h"
#include "preload/support/log.h"
#include "preload/python/attached_agent.h"
#include "preload/session/session.h"
#include "preload/write/writer.h"
#include "preload/support/recursion_guard.h"

namespace growtrace::preload {
namespace {

// Every hook, not only the allocation functions: an attached process that forks, execs, exits
// or unloads a library is traced as under `growtrace run`.
const char* const kHookNames[] = {GT_ALL_HOOK_NAMES};
constexpr int kHookCount = sizeof kHookNames / sizeof kHookNames[0];
// The allocation functions come first in kHookNames; only they are redirected inside libc too.
const char* const kAllocationHookNames[] = {GT_ALLOCATION_HOOKS(GT_NAME_OF_HOOK)};
constexpr int kAllocationHookCount = sizeof kAllocationHookNames / sizeof kAllocationHookNames[0];

GotTarget g_targets[kHookCount];
unsigned long g_self_base = 0;
pthread_mutex_t g_attach_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> g_attached{false};
char g_output[4096];  // the trace of the current (or last) attach
char g_library[4096];  // this library's path, preloaded into an image an attached process execs

// Our own definitions of malloc & co. `&malloc` here would name the process-wide one (this
// library is not in the global scope); a lookup in our own handle starts with ourselves.
bool find_own_hooks() {
    if (g_targets[0].replacement) return true;
    Dl_info self;
    if (!dladdr(reinterpret_cast<void*>(&find_own_hooks), &self) || !self.dli_fname) return false;
    void* handle = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (!handle) return false;
    for (int i = 0; i < kHookCount; ++i) {
        void* own = dlsym(handle, kHookNames[i]);
        Dl_info where;
        if (!own || !dladdr(own, &where) || where.dli_fbase != self.dli_fbase) {
            dlclose(handle);
            return false;
        }
        g_targets[i] = {kHookNames[i], own, i < kAllocationHookCount};
    }
    dlclose(handle);  // the lookup's reference: only gdb's load keeps the library
    g_self_base = reinterpret_cast<unsigned long>(self.dli_fbase);
    snprintf(g_library, sizeof g_library, "%s", self.dli_fname);
    return true;
}

// Loaded objects in load order (the order of the global lookup scope): base address and
// path ("" for the executable).
constexpr int kMaxObjects = 512;
struct LoadedObject {
    ElfW(Addr) start;  // where its first segment is mapped: what dladdr calls dli_fbase
    const char* path;
};

int list_object(dl_phdr_info* info, size_t, void* data) {
    auto* list = static_cast<std::pair<LoadedObject*, int>*>(data);
    ElfW(Addr) start = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        if (info->dlpi_phdr[i].p_type != PT_LOAD) continue;
        start = (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) & ~static_cast<ElfW(Addr)>(getpagesize() - 1);
        break;
    }
    if (list->second < kMaxObjects) list->first[list->second++] = {start, info->dlpi_name};
    return 0;
}

// The definition of `name` the program's calls reach: the first object in load order that
// defines it. dlsym(RTLD_DEFAULT) is not that: when an executable built without -fPIE takes a
// function's address, its PLT stub (an undefined symbol with a value, Debian's python3.11 has
// one for malloc) becomes the canonical address.
void* program_definition(const char* name, const LoadedObject* objects, int count) {
    for (int i = 0; i < count; ++i) {
        if (objects[i].start == g_self_base) continue;
        void* handle = dlopen(i == 0 ? nullptr : objects[i].path, RTLD_LAZY | RTLD_NOLOAD);
        if (!handle) continue;
        void* found = dlsym(handle, name);
        dlclose(handle);
        Dl_info where;
        void* entry = nullptr;
        if (!found || !dladdr1(found, &where, &entry, RTLD_DL_SYMENT) || !entry) continue;
        auto* symbol = static_cast<const ElfW(Sym)*>(entry);
        if (reinterpret_cast<ElfW(Addr)>(where.dli_fbase) == objects[i].start && symbol->st_shndx != SHN_UNDEF)
            return found;
    }
    return nullptr;
}

// The hooks forward to what dlsym(RTLD_NEXT) finds from this library, libc's functions. If the
// program's own calls go elsewhere (jemalloc preloaded), redirecting them would mix heaps.
bool forwards_to_program_allocator() {
    LoadedObject objects[kMaxObjects];
    std::pair<LoadedObject*, int> list{objects, 0};
    dl_iterate_phdr(list_object, &list);
    for (int i = 0; i < kHookCount; ++i) {
        void* program = program_definition(kHookNames[i], objects, list.second);
        void* next = dlsym(RTLD_NEXT, kHookNames[i]);
        if (program && next && program != next) {
            log_line("attach: the program's %s is not libc's; not attaching", kHookNames[i]);
            return false;
        }
    }
    return true;
}

// Objects the program loads after the attach are patched by the writer thread, within a tick
// of their loading: no thread of our own for it, as CPython 3.12+ warns at a fork in a process
// of more than one thread, and the writer, the only tracer thread left, leaves for such a fork
// (python/fork_check.h). A detach under way holds the lock: nothing to patch then.
void patch_objects_loaded_since() {
    if (!g_attached.load() || pthread_mutex_trylock(&g_attach_mutex) != 0) return;
    if (g_attached.load()) got_patch_loaded(g_targets, kHookCount, g_self_base);
    pthread_mutex_unlock(&g_attach_mutex);
}

void end_session() { g_session.end(); }

// main returning ends the process through exit() inside libc, past any GOT: the shutdown mark
// comes from an exit handler instead, which runs before every handler the program registered
// before the attach (static destructors included) and after those registered since.
void note_program_exiting() { g_session.program_exiting(); }

// A forked child of an attached process is traced (the session began its trace, and its writer
// patches the objects the child loads). The parent's writer may have held the locks.
void child_after_fork() {
    pthread_mutex_init(&g_attach_mutex, nullptr);
    got_patcher_child_after_fork();
}

// Once per process, after the session's own (fork handlers run in the order they were
// registered in the child).
void register_process_handlers() {
    static bool registered = false;
    if (registered) return;
    registered = true;
    atexit(note_program_exiting);
    pthread_atfork(nullptr, nullptr, child_after_fork);
}

}  // namespace

const char* attached_library() { return g_attached.load() ? g_library : nullptr; }

bool loaded_for_attach() {
    const char* output = getenv(environment::kOutput);
    if (output && *output) return false;
    const char* preload = getenv("LD_PRELOAD");
    return !(preload && strstr(preload, "libgrowtrace"));
}

}  // namespace growtrace::preload

using namespace growtrace::preload;
namespace attach_status = growtrace::attach_status;

namespace {
// For the tests: $GROWTRACE_TEST_ATTACH_FAIL in the process's environment makes the start fail
// on purpose once the trace has begun ("begin": its file open, its writer thread running) or
// while redirecting ("patch": more call sites than the table holds).
bool test_failure_at(const char* step) {
    const char* wanted = getenv(growtrace::environment::kTestAttachFail);
    return wanted && strcmp(wanted, step) == 0;
}

// A start that fails after the trace began undoes it: no slot was written (the GOT is patched
// all or nothing), the trace ends, its writer thread is waited for until the kernel no longer
// counts it, and its file is removed. Then nothing of the library runs, is pointed to or holds
// a descriptor, and `growtrace attach` unloads it (dlclose): the process is as it was.
void abandon_begun_trace(const char* output, bool first) {
    got_restore_all();
    g_session.end();
    if (!writer_wait_until_ended(5000)) log_line("attach: the writer thread did not end");
    unlink(output);
    if (first) g_session.release_capture();
}

int attach_start(const char* output, uint64_t sample_bytes) {
    RecursionGuard guard;
    pthread_mutex_lock(&g_attach_mutex);
    // The first trace of this process sets up stack capture; if it fails, that is undone too.
    bool first = !g_session.capture_ready();
    int rc;
    if (tracer_active() || g_attached.load()) rc = attach_status::kAlreadyTracing;
    else if (!find_own_hooks()) rc = attach_status::kOwnHooksMissing;
    else if (!forwards_to_program_allocator()) rc = attach_status::kOtherAllocator;
    else if (!output || !*output || !g_session.begin(SessionOrigin::Attached, output, sample_bytes)) {
        if (first) g_session.release_capture();
        rc = attach_status::kStartFailed;
    } else if (test_failure_at("begin")) {
        abandon_begun_trace(output, first);
        rc = attach_status::kStartFailed;
    } else {
        got_patcher_limit_slots_for_test(test_failure_at("patch") ? 3 : 0);
        rc = got_patch_loaded(g_targets, kHookCount, g_self_base, true);
        got_patcher_limit_slots_for_test(0);
        if (rc <= 0) {
            abandon_begun_trace(output, first);
            rc = rc < 0 ? attach_status::kTooManyCallSites : attach_status::kNoCallSites;
        } else {
            register_process_handlers();
            snprintf(g_output, sizeof g_output, "%s", output);
            g_attached.store(true);
            writer_run_each_tick(patch_objects_loaded_since);
            python::start_attached_agent();
        }
    }
    pthread_mutex_unlock(&g_attach_mutex);
    return rc;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int growtrace_attach_start(const char* output) {
    return attach_start(output, 0);
}

extern "C" __attribute__((visibility("default"))) int growtrace_attach_start_sampled(const char* output,
                                                                                   unsigned long long sample_bytes) {
    return attach_start(output, sample_bytes);
}

extern "C" __attribute__((visibility("default"))) int growtrace_attach_stop(void) {
    RecursionGuard guard;
    pthread_mutex_lock(&g_attach_mutex);
    int rc = attach_status::kNotAttached;
    if (g_attached.exchange(false)) {
        rc = got_restore_all();
        // A Python agent is undone under the GIL, which this thread (interrupted anywhere by
        // gdb) must not wait for: a thread of ours does it and then ends the trace.
        if (python::attached_agent_started()) python::stop_attached_agent(end_session);
        else g_session.end();
    }
    pthread_mutex_unlock(&g_attach_mutex);
    return rc;
}

// The trace of the current attach, or of the last one; "" if there was none. For `growtrace
// detach`, which names the file it closed.
extern "C" __attribute__((visibility("default"))) const char* growtrace_attach_output(void) { return g_output; }

// Called just before growtrace_attach_start: where the CPython agent is (answers in attach.h).
extern "C" __attribute__((visibility("default"))) int growtrace_attach_python(const char* startup_dir,
                                                                            const char* extension_path) {
    RecursionGuard guard;
    pthread_mutex_lock(&g_attach_mutex);
    int rc = g_attached.load() ? attach_status::kAgentAlreadyAttached
                               : python::prepare_attached_agent(startup_dir, extension_path);
    pthread_mutex_unlock(&g_attach_mutex);
    return rc;
}
