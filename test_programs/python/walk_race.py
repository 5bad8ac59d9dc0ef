"""Program objects dropped by one thread while the tracer's container walk, on another, still
holds a reference to them (its heap pass holds every tracked object, a cache's newest entries
are held until the walk reports them): the walk's own reference is then the last, and the
object is freed inside the walk. Each of those frees is the program's, and must be recorded.

Two threads churn a module-level cache of dicts, bounded at 400 entries, while the main thread
allocates (walks are queued on it) and the interpreter switches threads at nearly every chance.
At the end the cache is emptied: nothing made at the churn's line is still alive.

    python walk_race.py [--seconds S]
"""
import argparse
import sys
import threading
import time

CACHE = {}
LOCK = threading.Lock()


def churn(stop, first):
    n = first
    while not stop.is_set():
        entry = {"n": n, "items": [n, n + 1]}  # mark: churned_entry
        with LOCK:
            CACHE[n] = entry
            if len(CACHE) > 400:
                del CACHE[next(iter(CACHE))]
        n += 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    sys.setswitchinterval(1e-6)
    stop = threading.Event()
    threads = [threading.Thread(target=churn, args=(stop, first)) for first in (0, 1)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        [str(i) for i in range(100)]
    stop.set()
    for t in threads:
        t.join()
    with LOCK:
        CACHE.clear()
    print("done", flush=True)


if __name__ == "__main__":
    sys.exit(main())
