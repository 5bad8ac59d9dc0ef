"""What CPython's test_gc.test_get_count asserts, again and again: right after gc.collect(), the
count of young objects (gc.get_count()[0]) is near nothing. Under growtrace the agent's container
walks run in a collection's callback when their time has come; the objects they make must not
count as the program's.

    python young_count.py [--walks W]

Collects until at least W walks ran (under growtrace; two seconds untraced), then prints
`largest_young_count=N walks=W`.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import AgentWalks  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--walks", type=int, default=3)
    args = parser.parse_args()
    walks = AgentWalks()
    first = walks.count()
    deadline = time.monotonic() + (60 if first is not None else 2)
    keep, largest, ran = [], 0, 0
    while time.monotonic() < deadline:
        keep.append({str(i): [i] for i in range(200)})  # something for the walks to measure
        gc.collect()
        largest = max(largest, gc.get_count()[0])
        if first is not None:
            ran = walks.count() - first
            if ran >= args.walks:
                break
    print(f"largest_young_count={largest} walks={ran}")


if __name__ == "__main__":
    main()
