"""What a program sees of gc.callbacks, and how the collector calls what it puts there.

Each round ("tick") starts from an empty gc.callbacks and exercises it the ways programs do:
append, remove, clear, slice assignment, rebinding the module attribute (which the collector
ignores: it keeps the list it made at start-up), a callback that raises, an entry that is not
callable, a callback that appends another during a collection and one that removes itself,
printing, pickling and copying the list, the callbacks' arguments (is the phase string or the
info dict the same object for two callbacks of one phase), their stack, reference counts and
referrers, gc.get_objects(). It prints one line per round: "tick N " and what it saw, as JSON.
Traced (`growtrace run`, or attached with `growtrace attach` at any time) every line must be
the line an untraced run prints: the agent's own gc callback must not show.

With GO_PREFIX (for a test that attaches between rounds, not during one: a program iterating
over gc.callbacks at the moment of the attach goes on over the list the agent took), round N
waits until the file GO_PREFIX.N exists.

    python gc_callbacks_seen.py [ROUNDS=1] [PERIOD_S=0] [GO_PREFIX]
"""

from __future__ import annotations

import copy
import gc
import json
import os
import pickle
import sys
import time
import traceback
import types


def lists_of_callbacks(names: tuple) -> int:
    # The lists the collector tracks that hold a function of one of these names. Whether a list
    # is still tracked is asked after its entries were looked at: an agent attached meanwhile
    # (from another thread, between two steps here) untracks the list it put its callback in.
    return sum(1 for o in gc.get_objects()
               if type(o) is list and any(type(e) in (types.FunctionType, types.BuiltinFunctionType)
                                          and e.__name__ in names for e in o) and gc.is_tracked(o))


def exercise() -> dict:
    seen: dict = {}
    events: list = []
    unraisable: list = []
    gc.collect()  # the garbage of the round before, and its callbacks' reports, gone

    def hook(args) -> None:
        unraisable.append([type(args.exc_value).__name__, str(args.exc_value), args.err_msg,
                           getattr(args.object, "__name__", repr(args.object))])

    old_hook, sys.unraisablehook = sys.unraisablehook, hook
    # Only the collections asked for below: when the collector runs by itself depends on every
    # allocation, the tracer's Python agent's too.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        seen["initial"] = [len(gc.callbacks), repr(gc.callbacks), type(gc.callbacks).__name__,
                           gc.callbacks is gc.callbacks, gc.is_tracked(gc.callbacks),
                           sys.getrefcount(gc.callbacks)]
        seen["referrers_of_list"] = sorted(type(r).__name__ for r in gc.get_referrers(gc.callbacks))
        seen["lists_of_callbacks"] = lists_of_callbacks(("gc_callback", "first"))

        first_args: list = []

        def first(phase: str, info: dict) -> None:
            first_args[:] = [phase, info]
            events.append(["first", phase, sorted(info), info["generation"], sys.getrefcount(first)])

        def second(phase: str, info: dict) -> None:
            events.append(["second", phase, phase is first_args[0], info is first_args[1], phase == first_args[0]])

        def stack(phase: str, info: dict) -> None:
            if phase == "start":
                events.append(["stack"] + [f.name for f in traceback.extract_stack()][-3:])

        def raises(phase: str, info: dict) -> None:
            raise ValueError(f"raised at {phase}")

        def late(phase: str, info: dict) -> None:
            events.append(["late", phase])

        def adds_late(phase: str, info: dict) -> None:
            events.append(["adds_late", phase])
            if late not in gc.callbacks:
                gc.callbacks.append(late)

        def leaves(phase: str, info: dict) -> None:
            events.append(["leaves", phase])
            gc.callbacks.remove(leaves)

        def after_leaves(phase: str, info: dict) -> None:
            events.append(["after_leaves", phase])

        gc.callbacks.append(first)
        gc.callbacks.append(second)
        gc.callbacks.append(stack)
        seen["registered"] = [len(gc.callbacks), [c.__name__ for c in gc.callbacks], first in gc.callbacks,
                              gc.callbacks.index(second), gc.callbacks.count(first), gc.callbacks == [first, second, stack]]
        seen["referrers_of_callback"] = sorted(type(r).__name__ for r in gc.get_referrers(first))
        seen["lists_of_callbacks_registered"] = lists_of_callbacks(("first",))
        seen["repr_names"] = repr(gc.callbacks).count("function")
        seen["pickled"] = pickle.loads(pickle.dumps([c.__qualname__ for c in gc.callbacks]))
        seen["copied"] = [copy.copy(gc.callbacks) == gc.callbacks, copy.copy(gc.callbacks) is gc.callbacks,
                          list(gc.callbacks) == gc.callbacks]
        try:
            pickle.dumps(gc.callbacks)  # local functions: not picklable, the same error both ways
        except Exception as e:
            seen["pickle_error"] = type(e).__name__
        gc.collect()
        seen["full"] = list(events)
        events.clear()
        gc.collect(0)
        seen["young"] = list(events)
        events.clear()

        gc.callbacks.remove(stack)
        gc.callbacks.insert(0, raises)
        gc.callbacks.append(42)
        gc.collect(1)
        seen["raising"] = [list(events), list(unraisable)]
        events.clear()
        unraisable.clear()

        gc.callbacks[:] = [adds_late, leaves, after_leaves]
        gc.collect(0)
        seen["changed_during"] = [list(events), [c.__name__ for c in gc.callbacks]]
        events.clear()

        # Rebinding the attribute: the collector still calls the list it was bound to before.
        saved = gc.callbacks
        gc.callbacks = [second]
        gc.collect(0)
        seen["rebound"] = [list(events), len(gc.callbacks), len(saved)]
        events.clear()
        gc.callbacks = saved

        gc.callbacks.clear()
        gc.collect(0)
        seen["cleared"] = [list(events), len(gc.callbacks), gc.callbacks == []]
        gc.callbacks.append(first)
        gc.callbacks[:] = []
        gc.collect(0)
        seen["emptied"] = [list(events), len(gc.callbacks)]
        try:
            gc.callbacks.remove(first)
        except ValueError as e:
            seen["remove_missing"] = str(e)
        seen["final"] = [len(gc.callbacks), repr(gc.callbacks)]
    finally:
        sys.unraisablehook = old_hook
        if was_enabled:
            gc.enable()
    return seen


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    period = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    go_prefix = sys.argv[3] if len(sys.argv) > 3 else None
    for tick in range(rounds):
        deadline = time.monotonic() + 60
        while go_prefix and not os.path.exists(f"{go_prefix}.{tick}") and time.monotonic() < deadline:
            time.sleep(0.01)
        print(f"tick {tick} {json.dumps(exercise(), sort_keys=True)}", flush=True)
        if period:
            time.sleep(period)


if __name__ == "__main__":
    main()
