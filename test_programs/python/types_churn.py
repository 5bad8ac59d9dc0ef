"""Many classes with one name are created, used once and dropped.

Every iteration builds ``type("Payload", (Base,), ...)``, instantiates it and lets it go;
the cyclic garbage collector reclaims the classes, so the number of live ``Payload`` classes
stays small however long the program runs. A type-creation record is emitted for each, but
this is churn, not an accumulation of duplicate types: growtrace must not report it.
"""

import argparse
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402


class Base:
    __slots__ = ()


def make_payload_class(i: int) -> type:
    return type("Payload", (Base,), {"__slots__": ("value",), "index": i})  # mark: type_created


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=60000)
    args = parser.parse_args()
    summary = Summary("types_churn")
    total = 0
    peak_live = 0
    for i in range(args.iterations):
        cls = make_payload_class(i)
        obj = cls()
        obj.value = i
        total += obj.value - cls.index
        del cls, obj
        if i % 5000 == 0:
            peak_live = max(peak_live, len(Base.__subclasses__()))
    gc.collect()
    summary["iterations"] = args.iterations
    summary["live_payload_classes"] = len(Base.__subclasses__())
    summary["peak_live_sampled"] = peak_live
    summary["checksum"] = total
    summary.print()


if __name__ == "__main__":
    main()
