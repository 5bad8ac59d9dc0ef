"""Allocates under every shape of Python stack the tracer's incremental capture must get right.

Run with GROWTRACE_VERIFY_STACKS=1, the tracer checks each captured stack against a full walk;
the end-to-end test asserts that none differs. The shapes: one helper called from two lines of
the same caller (same frame address, same instruction, different caller line), code compiled
at run time and dropped (new code objects at dead ones' addresses), recursion going
down and up, recursion deeper than the tracer keeps (96 frames), generators and coroutines
(frames outside the thread's frame stack, resumed at other depths), closures (a prologue that
makes cells), exceptions unwinding through frames, comprehensions, class bodies, and threads.

    python stack_shapes.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import threading


def leaf(n: int) -> list:
    return [n, str(n), (n, n + 1)]


def caller_of_two_lines(n: int) -> list:
    first = leaf(n)  # same leaf frame, same instruction, but called from this line...
    second = leaf(n + 1)  # ...and from this one
    return first + second


def recurse(depth: int) -> list:
    if depth == 0:
        return leaf(depth)
    out = recurse(depth - 1)
    out.append(leaf(depth))  # allocates on the way back up, at every depth
    return out


def numbers(limit: int):
    for i in range(limit):
        yield leaf(i)  # resumed from wherever the consumer is


def consume_at_depth(gen, depth: int) -> list:
    if depth:
        return consume_at_depth(gen, depth - 1)
    return next(gen)


def with_cells(n: int):
    a, b, c, d, e, f, g, h, i, j = (leaf(k) for k in range(10))

    def inner() -> list:
        return [a, b, c, d, e, f, g, h, i, j, leaf(n)]

    return inner()


def raise_deep(depth: int) -> None:
    if depth == 0:
        raise ValueError(leaf(depth))
    raise_deep(depth - 1)


class Built:
    made = [leaf(k) for k in range(20)]


async def agen(n: int) -> list:
    await asyncio.sleep(0)
    return leaf(n)


async def gather(n: int) -> list:
    return await asyncio.gather(*(agen(k) for k in range(n)))


def compiled_at_run_time(r: int) -> int:
    # Code made and dropped while the program runs (templates): new code objects keep taking
    # the addresses of dead ones, whose frames the tracer must not confuse with them.
    namespace: dict = {"leaf": leaf}
    exec(compile(f"def render(n):\n    return leaf(n + {r})\nout = render(3)\n", f"<template {r}>", "exec"), namespace)
    return len(namespace["out"])


def one_round(r: int) -> int:
    kept = 0
    kept += len(caller_of_two_lines(r))
    kept += len(recurse(r % 40))
    kept += len(recurse(130))  # deeper than the tracer's 96 frames
    gen = numbers(50)
    for depth in range(0, 50):
        kept += len(consume_at_depth(gen, depth % 7))
    kept += len(with_cells(r))
    try:
        raise_deep(r % 20)
    except ValueError as error:
        kept += len(error.args)
    kept += len({k: leaf(k) for k in range(30)})
    kept += len(type(f"Made{r}", (Built,), {"x": leaf(r)}).made)
    kept += len(asyncio.run(gather(5)))
    kept += sum(compiled_at_run_time(r * 10 + k) for k in range(10))
    return kept


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    total = [0]

    def worker(offset: int) -> None:
        for r in range(args.rounds):
            total[0] += one_round(r + offset)

    threads = [threading.Thread(target=worker, args=(k * 1000,)) for k in range(3)]
    for t in threads:
        t.start()
    worker(7)
    for t in threads:
        t.join()
    print(f"stack_shapes rounds={args.rounds} total={total[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
