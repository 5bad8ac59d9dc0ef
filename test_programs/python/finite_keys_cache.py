"""An unbounded cache over a finite key set: it fills once, then only hits.

``lookup`` is ``functools.lru_cache(maxsize=None)``; the program asks it for 256 distinct
keys over and over. Every insertion happens in the first round; after that the cache is
constant in size however long the program runs. growtrace must not report it.
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402

KEYS = 256


@functools.lru_cache(maxsize=None)  # mark: cache_created
def lookup(name: str) -> list:
    return [name * 8 for _ in range(64)] + [bytes(1024)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30000)
    args = parser.parse_args()
    summary = Summary("finite_keys_cache")
    names = [f"key{i:04d}" for i in range(KEYS)]
    total = 0
    for _ in range(args.rounds):
        for name in names:
            total += len(lookup(name))  # mark: cache_call
    summary["rounds"] = args.rounds
    summary["cache"] = lookup.cache_info()
    summary["checksum"] = total
    summary.print()


if __name__ == "__main__":
    main()
