"""A module-level dict that grows for ever; not an lru_cache.

``remember(key, value)`` stores into ``_SEEN`` at one known line, and the program calls it
with a new key each time, so ``_SEEN`` (and the memory of its values) grows linearly with
the work done. growtrace must name ``remember`` and that line as the growing store; the
Python agent must record no cache insertion for it (it is not an lru_cache).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402

_SEEN: dict = {}


def remember(key: str, value: object) -> None:
    _SEEN[key] = value  # mark: dict_store


def make_value(i: int) -> list:
    return [f"item-{i}-{j}" for j in range(8)] + [bytes(1024)]  # mark: make_value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=60000)
    parser.add_argument("--pause-every", type=int, default=1000,
                        help="sleep --pause seconds after this many calls (spreads growth over time)")
    parser.add_argument("--pause", type=float, default=0.02)
    args = parser.parse_args()
    summary = Summary("growing_dict")
    for i in range(args.iterations):
        remember(f"request-{i}", make_value(i))  # mark: remember_call
        if args.pause_every and (i + 1) % args.pause_every == 0:
            time.sleep(args.pause)
    summary["iterations"] = args.iterations
    summary["entries"] = len(_SEEN)
    summary.print()


if __name__ == "__main__":
    main()
