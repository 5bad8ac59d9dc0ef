#include "preload/python/attached_agent.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "contracts/status_codes.h"
#include "contracts/growtrace_py_api.h"
#include "preload/support/log.h"
#include "preload/cpython/interpreter.h"
#include "preload/python/python_allocator.h"
#include "preload/cpython/python_frames.h"
#include "preload/support/recursion_guard.h"
#include "preload/support/tracer_thread.h"

extern "C" const growtrace_py_api* growtrace_py_get_api(uint32_t min_version);

namespace growtrace::preload::python {
namespace {

// How long stopping waits for a start still waiting for the GIL before it goes on without it.
constexpr int kStartWaitSeconds = 10;

// Runs growtrace-loader.py in a private namespace and keeps the agent's detach() in it.
constexpr const char* kBootstrap =
    "with open(LOADER, 'rb') as f:\n"
    "    exec(compile(f.read(), LOADER, 'exec'))\n"
    "detach = attach(HERE, EXTENSION, API)\n"
    "if detach is not None:\n"
    "    DETACH = detach\n";

const CApi& api() { return interpreter().api; }

bool usable() { return api().is_initialized() && !api().is_finalizing(); }

char g_startup_dir[PATH_MAX];
char g_loader[PATH_MAX];
char g_extension[PATH_MAX];
bool g_prepared = false;  // under the attach mutex

// Touched only with the GIL held, except g_started (attach mutex) and the start handshake.
Object* g_namespace = nullptr;  // the bootstrap's globals; DETACH in it
std::atomic<unsigned> g_generation{0};
std::atomic<bool> g_started{false};
pthread_mutex_t g_start_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_start_done = PTHREAD_COND_INITIALIZER;
bool g_start_running = false;

void set_item(Object* dict, const char* key, Object* value) {
    if (!value) return;
    api().dict_set(dict, key, value);
    api().decref(value);
}

// GIL held.
void run_bootstrap() {
    Object* globals = api().dict_new();
    if (!globals) return;
    set_item(globals, "__name__", api().text("_growtrace_attach"));
    set_item(globals, "LOADER", api().text(g_loader));
    set_item(globals, "HERE", api().text(g_startup_dir));
    set_item(globals, "EXTENSION", api().text(g_extension));
    set_item(globals, "API", api().number(reinterpret_cast<uintptr_t>(&growtrace_py_get_api)));
    Object* result = api().run(kBootstrap, kFileInput, globals, globals, nullptr);
    if (!result) {
        // The loader reports its own failures; this is one of the bootstrap itself. PyErr_Print
        // would leave sys.last_value behind for the program to see.
        api().clear_error();
        log_line("python agent not started: %s could not be run", g_loader);
        api().decref(globals);
        return;
    }
    api().decref(result);
    g_namespace = globals;
}

void finish_start() {
    pthread_mutex_lock(&g_start_mutex);
    g_start_running = false;
    pthread_cond_broadcast(&g_start_done);
    pthread_mutex_unlock(&g_start_mutex);
}

void* start_main(void* arg) {
    t_in_tracer = true;  // the agent's own allocations are not the program's
    prctl(PR_SET_NAME, "growtrace-py", 0, 0, 0);
    auto generation = static_cast<unsigned>(reinterpret_cast<uintptr_t>(arg));
    if (usable()) {
        int gil = api().gil_ensure();
        if (g_generation.load() == generation) run_bootstrap();  // else stopped meanwhile
        api().gil_release(gil);
    }
    finish_start();
    return nullptr;
}

// GIL held.
void run_detach() {
    if (!g_namespace) return;
    Object* detach = api().dict_get(g_namespace, "DETACH");  // borrowed
    if (detach) {
        Object* result = api().call(detach);
        if (result) api().decref(result);
        else api().clear_error();
    }
    api().decref(g_namespace);
    g_namespace = nullptr;
}

void wait_for_start() {
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += kStartWaitSeconds;
    pthread_mutex_lock(&g_start_mutex);
    while (g_start_running && pthread_cond_timedwait(&g_start_done, &g_start_mutex, &deadline) == 0) {}
    pthread_mutex_unlock(&g_start_mutex);
}

void* stop_main(void* arg) {
    t_in_tracer = true;
    prctl(PR_SET_NAME, "growtrace-py", 0, 0, 0);
    auto finish = reinterpret_cast<void (*)()>(arg);
    wait_for_start();
    if (usable()) {
        int gil = api().gil_ensure();
        // The detach's last walk is the agent's own work, not the tracer's: a program object
        // it holds the last reference to is freed by the program (recursion_guard.h).
        t_in_tracer = false;
        t_agent_work = true;
        run_detach();
        t_agent_work = false;
        t_in_tracer = true;
        uninstall_allocator_hooks();
        api().gil_release(gil);
    }
    finish();
    return nullptr;
}

bool copy_path(char* out, const char* dir, const char* name) {
    int n = snprintf(out, PATH_MAX, "%s%s%s", dir, name ? "/" : "", name ? name : "");
    return n > 0 && n < PATH_MAX && access(out, R_OK) == 0;
}

// The agent is built once per interpreter version, all in one folder: the one for this
// interpreter sits beside the extension gdb named.
bool copy_extension(const char* named) {
    const char* slash = strrchr(named, '/');
    if (!slash) return false;
    char name[64];
    snprintf(name, sizeof name, "_growtrace_agent.cpython-%d%d-x86_64-linux-gnu.so", interpreter().major,
             interpreter().minor);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", static_cast<int>(slash - named), named);
    return copy_path(g_extension, dir, name);
}

}  // namespace

int prepare_attached_agent(const char* startup_dir, const char* extension_path) {
    RecursionGuard guard;
    g_prepared = false;
    if (!probe() || !usable()) return attach_status::kNoPython;
    if (!startup_dir || !extension_path || !copy_path(g_startup_dir, startup_dir, nullptr) ||
        !copy_path(g_loader, startup_dir, "growtrace-loader.py") || !copy_extension(extension_path))
        return attach_status::kAgentFilesMissing;
    g_prepared = true;
    return attach_status::python_version_code(interpreter().major, interpreter().minor);
}

bool start_attached_agent() {
    RecursionGuard guard;
    if (!g_prepared) return false;
    g_prepared = false;
    unsigned generation = g_generation.fetch_add(1) + 1;
    pthread_mutex_lock(&g_start_mutex);
    g_start_running = true;
    pthread_mutex_unlock(&g_start_mutex);
    int rc = start_tracer_thread(start_main, reinterpret_cast<void*>(static_cast<uintptr_t>(generation)));
    if (rc != 0) {
        finish_start();
        log_line("attach: no thread to start the python agent: %s", strerror(rc));
        return false;
    }
    g_started.store(true);
    return true;
}

const char* attached_agent_extension() { return attached_agent_started() ? g_extension : ""; }

bool attached_agent_started() { return g_started.load(); }

void stop_attached_agent(void (*finish)()) {
    RecursionGuard guard;
    g_started.store(false);
    g_generation.fetch_add(1);  // a start still waiting for the GIL gives up
    if (start_tracer_thread(stop_main, reinterpret_cast<void*>(finish)) != 0) finish();
}

}  // namespace growtrace::preload::python
