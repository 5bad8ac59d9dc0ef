"""Compiles code at run time, runs it and drops it, as template engines do, then says how many
of those code objects are still alive after a full collection: the tracer must not keep any
alive that the program let go.

    python compiled_code.py [--rounds N]
"""

from __future__ import annotations

import argparse
import gc
import weakref


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    refs = []
    for i in range(args.rounds):
        source = f"def render_{i}(items):\n    return [str(x) * {i % 7 + 1} for x in items]\nout = render_{i}(range(20))\n"
        code = compile(source, f"<template {i}>", "exec")
        namespace: dict = {}
        exec(code, namespace)
        refs.append(weakref.ref(code))
        refs.append(weakref.ref(namespace[f"render_{i}"].__code__))
        del code, namespace
    gc.collect()
    alive = sum(1 for r in refs if r() is not None)
    print(f"compiled_code rounds={args.rounds} code_objects={len(refs)} alive={alive}", flush=True)


if __name__ == "__main__":
    main()
