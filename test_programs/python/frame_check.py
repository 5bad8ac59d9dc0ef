"""Allocates marker blocks under Python stacks of many shapes and writes, for each, the stack
CPython itself reports for it (traceback.extract_stack), so that an end-to-end test can compare
the frames the tracer recorded with the interpreter's own view, on every version.

Each block is a bytearray of a size no other allocation has, kept alive to the end.

    python frame_check.py OUT.json
"""

from __future__ import annotations

import json
import sys
import threading
import traceback

from _common import mark_line

SIZES = iter(range(3_000_000, 4_000_000, 4096))
kept: list[bytearray] = []
expected: dict[int, list[list]] = {}
ALLOC_LINE = mark_line(__file__, "alloc")


def block() -> int:
    size = next(SIZES)
    stack = traceback.extract_stack()[:-1]  # the callers of block()
    data = bytearray(size)  # mark: alloc
    kept.append(data)
    expected[size] = [[f.filename, f.lineno, f.name] for f in stack] + [[__file__, ALLOC_LINE, "block"]]
    return size


def nested(depth: int) -> int:
    return block() if depth == 0 else nested(depth - 1)


def numbers():
    yield block()
    yield block()


class Holder:
    def method(self) -> int:
        return block()

    @staticmethod
    def static() -> int:
        return block()


def decorated(fn):
    def wrapper(*args):
        return fn(*args)
    return wrapper


@decorated
def wrapped() -> int:
    return block()


def through_c() -> list:
    # Python called back from C: sorted's key, map, a class's __init__ from type.__call__.
    class Made:
        def __init__(self) -> None:
            self.size = block()

    return sorted([2, 1], key=lambda x: (block(), x)) + list(map(lambda _: block(), range(2))) + [Made().size]


def in_handler() -> int:
    try:
        raise ValueError("x")
    except ValueError:
        return block()


def comprehension() -> list:
    return [block() for _ in range(2)]


def coroutine_body():
    async def inner():
        return block()

    c = inner()
    try:
        c.send(None)
    except StopIteration as stop:
        return stop.value


def main() -> None:
    block()
    nested(5)
    nested(40)
    list(numbers())
    Holder().method()
    Holder.static()
    wrapped()
    through_c()
    in_handler()
    comprehension()
    coroutine_body()
    worker = threading.Thread(target=nested, args=(3,))
    worker.start()
    worker.join()
    with open(sys.argv[1], "w") as out:
        json.dump({str(size): frames for size, frames in expected.items()}, out)
    print(f"frame_check blocks={len(expected)}")


if __name__ == "__main__":
    main()
