"""A method memoized with lru_cache(maxsize=4096), fed ever-new keys: bounded, and big.

Each entry's value is made at the method's own line (a tuple, a float, a string), 4096 entries
at most, however many requests come. A report once called the cache bounded and the memory at
that very line unbounded growth (issue #25): what the tracer counts alive at that line must not
grow with the requests, and the report must be quiet.

    python memoized_method.py [--requests N]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402


class Pricer:
    @functools.lru_cache(maxsize=4096)  # mark: cache_created
    def price(self, key: int) -> tuple:
        return (key, key * 1.5, f"sku-{key}")  # mark: value_made


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=60000)
    args = parser.parse_args()
    summary = Summary("memoized_method")
    pricer = Pricer()
    total = 0.0
    for key in range(args.requests):
        total += pricer.price(key)[1]
    summary["cache"] = Pricer.price.cache_info()
    summary["checksum"] = total
    summary.print()


if __name__ == "__main__":
    main()
