/* When a container walk runs (docs/containers.md). The walk itself is Python (growtrace-agent.py,
 * _ContainerWalker), and containers.c has what it reports. It runs on the program's own threads,
 * never on one of ours: at the start of a collection (gc_callbacks.c) or as a pending call
 * (Py_AddPendingCall, queued from the library's tick on the main thread), once its time has
 * come, and always as the agent's own work, whose allocations the library does not record (it
 * records every free: a program object the walk held last is freed by the walk). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <time.h>

#include "sinks.h"
#include "walks.h"
#include "young_count.h"

/* A walk's cost is bounded by the time it took: the next walk waits at least `g_walk_period_ns`,
   and at least what it is expected to cost divided by `g_walk_share`. */
static PyObject *g_walker;             /* callable, or NULL: no walks */
static int g_in_walk;
static volatile int g_walk_pending;    /* a pending call is queued */
static volatile long long g_walk_pending_since;
static volatile long long g_last_walk_end_ns;  /* monotonic; set_walker() counts as a walk of no cost */
static long long g_last_walk_cost_ns;           /* its CPU time on its thread */
static Py_ssize_t g_last_walk_modules;          /* len(sys.modules) when it ran */
static PyObject *g_modules;                     /* sys.modules, held while there is a walker */
static long long g_walk_period_ns = 250000000LL;
static double g_walk_share = 0.01;

static long long monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The calling thread's CPU time: what a walk costs the program, whatever else the machine runs. */
static long long thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Calls callable(arg) (or callable() when arg is NULL) with the library told that what is
   allocated meanwhile is the agent's own work, not the program's: it records no allocation.
   It still records frees: another thread may drop a program object while the walk holds a
   reference to it, and the walk's release then frees it here. */
static PyObject *call_as_own_work(PyObject *callable, PyObject *arg) {
    /* The function, not g_native, is kept: the call may let another thread take the GIL, and
       a detach there sets g_native to NULL (stop()) before this thread comes back. The library
       stays loaded after a detach, so its function may still be called. */
    int (*own_work)(int) = native_has(offsetof(growtrace_py_api, own_work)) ? g_native->own_work : NULL;
    /* No collection may start inside: it would run the program's finalizers and gc callbacks,
       whose allocations are the program's, where the library records none. */
    int gc_was_enabled = PyGC_Disable();
    int was_own = own_work ? own_work(1) : 0;
    /* The objects the walk made are not the program's: gc.get_count() must say after the walk
       what it said before (CPython's test_gc.test_get_count reads it right after gc.collect(),
       whose callbacks may run a walk). A collection made meanwhile (by another thread) has
       reset the count: it is left as that collection made it. */
    int *young = growtrace_young_count();
    const int young_before = *young;
    PyObject *r = arg ? PyObject_CallOneArg(callable, arg) : PyObject_CallNoArgs(callable);
    if (*young >= young_before) *young = young_before;
    if (own_work) own_work(was_own);
    if (gc_was_enabled) PyGC_Enable();
    return r;
}

/* own_work(callable, arg): the final walk and the walk at detach, made from Python, are the
   agent's own work as much as the walks run from here. */
PyObject *own_work_call(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *callable, *arg;
    if (!PyArg_ParseTuple(args, "OO", &callable, &arg)) return NULL;
    return call_as_own_work(callable, arg);
}

static Py_ssize_t loaded_modules(void) {
    return g_modules && PyDict_Check(g_modules) ? PyDict_GET_SIZE(g_modules) : 0;
}

/* When the next walk may run. A walk's time grows with the modules it passes over (and with
   the heap, which this does not see), so the next one is expected to cost the last one's time
   scaled by how many more modules are loaded now: a
   program that imports most of its libraries after the first walk (the openai reproduction
   goes from 166 modules to over 1,000, and its walks from 25 to over 200 ms) is not walked
   again before that cost is paid for. No Python call, nothing allocated: the library's tick
   asks this from inside an allocation. */
static long long next_walk_ns(void) {
    double expected = (double)g_last_walk_cost_ns;
    Py_ssize_t now = loaded_modules();
    if (g_last_walk_modules > 0 && now > g_last_walk_modules) expected *= (double)now / (double)g_last_walk_modules;
    double wait = expected / g_walk_share;
    return g_last_walk_end_ns + (wait > (double)g_walk_period_ns ? (long long)wait : g_walk_period_ns);
}

void run_walk(void) {
    if (!g_walker || g_in_walk) return;
    g_in_walk = 1;
    long long begin = thread_cpu_ns();
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb); /* the program's exception in flight, if any, is kept */
    PyObject *walker = Py_NewRef(g_walker);
    PyObject *r = call_as_own_work(walker, NULL);
    Py_DECREF(walker);
    Py_XDECREF(r);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    g_last_walk_cost_ns = thread_cpu_ns() - begin;
    g_last_walk_modules = loaded_modules();
    g_last_walk_end_ns = monotonic_ns();
    g_in_walk = 0;
}

int walk_is_due(void) { return g_walker && !g_in_walk && monotonic_ns() >= next_walk_ns(); }

static int pending_walk(void *arg) {
    (void)arg;
    g_walk_pending = 0;
    if (walk_is_due()) run_walk();
    return 0; /* never raises into the program */
}

/* The library's tick: the main thread, holding the GIL, inside an allocation: it only queues. */
static void walk_tick(void) {
    long long now = monotonic_ns();
    if (!g_walker || now < next_walk_ns()) return;
    /* A call queued before a fork never runs in the child: asked again after a while. */
    if (g_walk_pending && now - g_walk_pending_since < 5000000000LL) return;
    g_walk_pending = 1;
    g_walk_pending_since = now;
    if (Py_AddPendingCall(pending_walk, NULL) != 0) g_walk_pending = 0;
}

/* walk_due(): whether a whole walk fits in the walks' share of the time now. The final walk
   and the one at detach are whole walks only then; otherwise they measure again only the
   containers already tracked, in the modules that hold them (GROWTRACE_PY_WALK_TRACKED_ONLY):
   in a run of seconds, a whole last walk would cost as much as all the others. A program that
   ends before its first walk gets a whole one. */
PyObject *walk_due(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    return PyBool_FromLong(g_last_walk_cost_ns == 0 || monotonic_ns() >= next_walk_ns());
}

/* set_walker(callable or None, min_period_s, share): None stops the walks (at the shutdown mark,
   at detach). */
PyObject *set_walker(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *walker;
    double period = 0.25, share = 0.01;
    if (!PyArg_ParseTuple(args, "O|dd", &walker, &period, &share)) return NULL;
    if (share > 0) g_walk_share = share;
    if (period > 0) g_walk_period_ns = (long long)(period * 1e9);
    Py_XSETREF(g_walker, walker == Py_None ? NULL : Py_NewRef(walker));
    PyObject *modules = g_walker ? PyImport_GetModuleDict() : NULL;
    Py_XSETREF(g_modules, Py_XNewRef(modules));
    g_last_walk_end_ns = monotonic_ns();
    g_last_walk_cost_ns = 0;
    g_last_walk_modules = loaded_modules();
    if (native_has(offsetof(growtrace_py_api, set_tick)) && g_native->set_tick)
        g_native->set_tick(g_walker ? walk_tick : NULL);
    Py_RETURN_NONE;
}
