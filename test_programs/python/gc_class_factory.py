"""A class factory whose classes only the cyclic garbage collector frees, and rarely.

Every request builds a class named ``Schema`` with ``type()`` (a class is always in reference
cycles: its ``__mro__`` and its attribute descriptors point back at it) and an instance holding
about 2 KB of data. The last ``--window`` classes are kept in a deque, long enough that they
survive the young collections and end in the oldest generation; then they are dropped. The
thresholds make full collections rare (``--threshold2``), so the dropped classes pile up as
garbage between them: memory rises for seconds and falls at each full collection. The program
holds at most ``--window`` classes: nothing grows.

``--keep`` keeps every class in a list instead: that population does grow.

    python gc_class_factory.py [--requests N] [--seconds S] [--window K] [--threshold2 T] [--keep]
                               [--collect-at-end] [--collect-every N]
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402


KEPT: list = []  # --keep: every class, for as long as the program lives


class Record:
    __slots__ = ("payload", "owner")


def make_schema(i: int) -> type:
    fields = {f"field_{n}": n for n in range(12)}
    return type("Schema", (Record,), {"__slots__": (), "index": i, **fields})  # mark: schema_created


def handle_request(i: int) -> type:
    cls = make_schema(i)
    obj = cls()
    obj.payload = [str(i * n) * 8 for n in range(24)]  # mark: payload
    obj.owner = cls
    cls.example = obj  # the class and its instance hold each other: only a collection frees them
    return cls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--threshold2", type=int, default=40)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--collect-at-end", action="store_true", help="gc.collect() before the summary")
    parser.add_argument("--collect-every", type=int, default=0, help="a full collection every N requests")
    args = parser.parse_args()
    gc.set_threshold(700, 10, args.threshold2)
    summary = Summary("gc_class_factory")
    recent: collections.deque = collections.deque(maxlen=args.window)
    start = time.monotonic()
    checksum = 0
    for i in range(args.requests):
        cls = handle_request(i)
        checksum += cls.index
        (KEPT.append if args.keep else recent.append)(cls)
        del cls
        if args.collect_every and (i + 1) % args.collect_every == 0:
            gc.collect()
        left = start + args.seconds * (i + 1) / args.requests - time.monotonic()
        if left > 0:
            time.sleep(left)
    if args.collect_at_end:
        gc.collect()
    summary["requests"] = args.requests
    summary["held"] = len(KEPT) + len(recent)
    summary["checksum"] = checksum
    summary.print()


if __name__ == "__main__":
    main()
