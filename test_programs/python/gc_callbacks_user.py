"""A program that looks at gc.callbacks, calls what it finds there, and empties it.

Some programs (test harnesses, profilers, frameworks) manage gc.callbacks themselves: they call
each registered callback by hand, remove the ones they did not add, or clear the list. Under the
tracer (whose agent keeps its callback in the collector's own list, out of gc.callbacks) the
program must work and print the same.

    python gc_callbacks_user.py
"""

from __future__ import annotations

import gc

seen: list[tuple[str, int]] = []


def own_callback(phase: str, info: dict) -> None:
    seen.append((phase, info["generation"]))


def main() -> None:
    # Every callback already registered, called by hand as the collector would, then with a
    # full collection's arguments and with arguments the collector never passes.
    failures = 0
    for callback in list(gc.callbacks):
        for args in (("start", {"generation": 0, "collected": 0, "uncollectable": 0}),
                     ("stop", {"generation": 0, "collected": 0, "uncollectable": 0}),
                     ("start", {"generation": 2, "collected": 0, "uncollectable": 0}),
                     ("stop", {"generation": 2, "collected": 0, "uncollectable": 0}),
                     ("bogus", None)):
            try:
                callback(*args)
            except Exception:
                failures += 1
    gc.callbacks.append(own_callback)
    gc.collect()
    first = list(seen)
    # Only ours: everything else removed, then the list emptied.
    for callback in [c for c in gc.callbacks if c is not own_callback]:
        gc.callbacks.remove(callback)
    gc.collect(1)
    gc.callbacks.clear()
    gc.collect()
    cycles = []
    for i in range(2000):
        node: dict = {"i": i}
        node["self"] = node
        cycles.append(node)
    del cycles
    collected = gc.collect()
    print(f"gc_callbacks_user first={first} after={seen[len(first):]} own_registered={own_callback in gc.callbacks} "
          f"collected_cycles={collected >= 2000} failures={failures}", flush=True)


if __name__ == "__main__":
    main()
