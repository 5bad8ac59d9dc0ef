"""A bounded cache fed endless distinct keys: turnover, not growth.

``render`` is an ``lru_cache(maxsize=64)`` called with a new key every time; each value is
a sizeable object graph (a 4 KiB bytes object served by malloc plus ~40 small objects
served by pymalloc). The cache holds at most 64 entries, so the memory it retains is
bounded however long the program runs. growtrace must not report it.
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402


@functools.lru_cache(maxsize=64)  # mark: cache_created
def render(key: int) -> tuple:
    blob = bytes(4096)
    words = [f"word-{key}-{i}" for i in range(32)]
    return (blob, words, {"key": key, "n": len(words)})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=100000)
    args = parser.parse_args()
    summary = Summary("bounded_lru")
    total = 0
    for key in range(args.iterations):
        total += render(key)[2]["n"]  # mark: cache_call
        render(key)  # a hit
    summary["iterations"] = args.iterations
    summary["cache"] = render.cache_info()
    summary["checksum"] = total
    summary.print()


if __name__ == "__main__":
    main()
