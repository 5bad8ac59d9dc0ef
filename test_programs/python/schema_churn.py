"""A library that generates a schema class per call, all of which die.

Each call builds a class named ``Schema`` (as validation libraries do for a model they are
handed), validates one record with it and leaves it in the caller's batch. A batch is dropped
once it is full; batches grow from 4 to 34 calls over the run, so the number of live classes
rises and falls, but never above 34, and a collection takes it back to the batch in hand. At
the end 10 classes are alive. Nothing accumulates: growtrace must not report duplicate types.

    python schema_churn.py [--calls N] [--seconds S]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402


LAST_BATCH: list = []


class BaseSchema:
    __slots__ = ()


def generate_schema(fields: tuple) -> type:
    namespace = {"__slots__": fields, "fields": fields}
    return type("Schema", (BaseSchema,), namespace)  # mark: schema_created


def validate(record: dict) -> object:
    schema = generate_schema(tuple(sorted(record)))
    obj = schema()
    for key, value in record.items():
        setattr(obj, key, value)
    return obj


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    summary = Summary("schema_churn")
    batch: list = []
    peak = 0
    start = time.monotonic()
    for i in range(args.calls):
        batch.append(validate({"id": i, "name": f"item-{i}", "price": i * 0.5}))
        peak = max(peak, len(batch))
        capacity = 4 + 30 * i // args.calls
        if len(batch) >= capacity:
            batch = []
        left = start + args.seconds * (i + 1) / args.calls - time.monotonic()
        if left > 0:
            time.sleep(left)
    # The last 10 stay with the program (a module global) until it exits.
    LAST_BATCH[:] = batch[-10:] + [validate({"id": -n}) for n in range(10 - min(10, len(batch)))]
    del batch
    gc.collect()
    summary["calls"] = args.calls
    summary["alive"] = len(BaseSchema.__subclasses__())
    summary["largest_batch"] = peak
    summary.print()


if __name__ == "__main__":
    main()
