# Run by gdb inside `growtrace attach` / `detach` (tools/attach/gdb_session.cpp embeds this file
# and appends the call `_gt_main(WAIT_SECONDS, CALLS)`). It picks the thread the calls run on,
# then makes the calls in order, printing a "growtrace-..." line for each step so that the
# command can say what is being waited for and what failed (tools/attach/gdb_output.cpp reads
# them).
#
# The calls (dlopen, the tracer's entry points) allocate and take the loader's locks, so they
# run on a thread that is not inside the allocator, the dynamic loader, stdio, fork or the
# tracer itself. If every thread is inside one (a single-threaded program busy allocating, or
# blocked reading inside stdio), the first one is let run until its outermost such call returns
# and the threads are looked at again: running a call there instead would re-enter malloc
# half-way through its own work (glibc takes no lock in a single-threaded process) or unlock a
# stdio lock that was never taken (the first thread the tracer starts turns stdio's locking
# on). That wait is bounded (WAIT_SECONDS): past it, nothing is called and gdb detaches,
# leaving the process as it was.
#
# Before the first call, gdb must show it can write the chosen thread's registers (it puts them
# all back after each call): if it cannot, a call would run and leave the thread with the
# call's registers, so nothing is called ("growtrace-failed registers ...").
#
# CALLS: (name, expressions, required, after_failed) for each call: the expressions are tried
# in turn (the next one only when gdb does not know a symbol of the previous); a 0 result of a
# required call stops the calls after it; an expression cast to (char*) gives text, read from
# the process. Each result is kept in gdb's $gt_NAME for the expressions of later calls. A call
# with after_failed (the name of an earlier call) runs only if that call answered <= 0, and only
# while no thread is stopped inside libgrowtrace (it undoes the load: dlclose).
import gdb, os, signal, threading, time
def _gt_say(*words):
    print("growtrace-" + " ".join(str(w).replace("\n", " ") for w in words), flush=True)
def _gt_outermost_unsafe(thread):
    thread.switch()
    frame, depth, found = gdb.newest_frame(), 0, None
    while frame is not None and depth < 96:
        name = frame.name() or ""
        lib = gdb.solib_name(frame.pc()) or ""
        if ("alloc" in name or "free" in name or name.startswith(("_int_", "_dl_", "dl_", "__libc_dl", "_IO_"))
                or "fork" in name or "libgrowtrace" in lib or "/ld-linux" in lib):
            found = (depth, name or "??")
        frame, depth = frame.older(), depth + 1
    return found
def _gt_select(deadline):
    while True:
        threads = sorted(gdb.selected_inferior().threads(), key=lambda t: t.num)
        unsafe = [(t, _gt_outermost_unsafe(t)) for t in threads]
        safe = [t for t, f in unsafe if f is None]
        if safe:
            safe[0].switch()
            return True
        # Wait for a thread of the program's, not one of the tracer's (they never leave it).
        waitable = [(t, f) for t, f in unsafe if not (t.name or "").startswith("growtrace-")] or unsafe
        thread, (depth, name) = waitable[0]
        thread.switch()
        frame = gdb.newest_frame()
        for _ in range(depth):
            frame = frame.older()
        caller = frame.older()
        if caller is None or time.monotonic() >= deadline:
            _gt_say("gave-up", thread.num, name, len(threads))
            return False
        _gt_say("waiting", thread.num, name, len(threads))
        gdb.execute("tbreak *%d thread %d" % (caller.pc(), thread.num), to_string=True)
        timer = threading.Timer(max(0.05, deadline - time.monotonic()), lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        try:
            gdb.execute("continue", to_string=True)
        except gdb.error as e:
            _gt_say("continue-failed", e)
            return False
        finally:
            timer.cancel()
        gdb.execute("delete", to_string=True)
def _gt_registers_writable():
    # A vector register, changed and put back while the thread is stopped: it is written through
    # the XSAVE state, which gdb before 14 cannot write where the CPU's is larger than it knows
    # (AMX) without libgrowtrace-gdb-xstate.so (tools/attach/gdb_xstate_shim.c).
    try:
        value = int(gdb.parse_and_eval("$xmm0.v4_int32[0]"))
    except gdb.error:
        return True
    try:
        gdb.execute("set var $xmm0.v4_int32[0] = %d" % (value ^ 1), to_string=True)
        gdb.execute("set var $xmm0.v4_int32[0] = %d" % value, to_string=True)
    except gdb.error as e:
        _gt_say("failed", "registers", e)
        return False
    return True
def _gt_call(name, expressions, required, results):
    for expression in expressions:
        _gt_say("calling", name)
        try:
            value = gdb.parse_and_eval(expression)
            if expression.startswith("(char*)"):
                _gt_say("text", name, value.string())
                return True
            value = int(value)
        except gdb.error as e:
            if "No symbol" in str(e) and expression is not expressions[-1]:
                continue
            _gt_say("failed", name, e)
            return False
        results[name] = value
        gdb.set_convenience_variable("gt_" + name, value)
        _gt_say("result", name, value)
        return value != 0 or not required
    return False
def _gt_thread_inside(library):
    chosen = gdb.selected_thread()
    try:
        for thread in gdb.selected_inferior().threads():
            thread.switch()
            frame, depth = gdb.newest_frame(), 0
            while frame is not None and depth < 96:
                if library in (gdb.solib_name(frame.pc()) or ""):
                    return "thread %d is inside %s" % (thread.num, frame.name() or "??")
                frame, depth = frame.older(), depth + 1
        return None
    finally:
        chosen.switch()
def _gt_main(wait_seconds, calls):
    results = {}
    if _gt_select(time.monotonic() + wait_seconds) and _gt_registers_writable():
        for name, expressions, required, after_failed in calls:
            if after_failed:
                if after_failed not in results or results[after_failed] > 0:
                    continue
                inside = _gt_thread_inside("libgrowtrace")
                if inside:
                    _gt_say("failed", name, inside)
                    break
            if not _gt_call(name, expressions, required, results):
                break
