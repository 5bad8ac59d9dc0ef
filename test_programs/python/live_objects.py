"""What the program keeps alive, after a full collection: must be the same traced and untraced.

The program makes classes at run time (some dropped, some kept), caches results on keys that
hold classes (an unbounded cache and a bounded one that evicts), compiles code at run time and
drops it, then collects and prints, for its own objects only, how many of each kind are alive
(from gc.get_objects()) and the reference counts of a few of them. A tracer that kept a class,
a key or a code object alive, or held a reference to one, would change this line.

    python live_objects.py [--rounds N]
"""

from __future__ import annotations

import argparse
import functools
import gc
import sys

MARK = "__live_objects_program__"


class Base:
    owner = MARK


def make_class(i: int) -> type:
    return type(f"Made{i % 5}", (Base,), {"index": i})


@functools.lru_cache(maxsize=None)
def describe(cls: type) -> tuple:
    return (cls.__name__, cls.index)


@functools.lru_cache(maxsize=16)
def describe_recent(cls: type) -> str:
    return f"{cls.__name__}:{cls.index}"


def compile_and_run(i: int) -> int:
    code = compile(f"result = {i} * 2\n", f"<generated {i % 3}>", "exec")
    namespace: dict = {}
    exec(code, namespace)
    return namespace["result"]


def own_kind(obj: object) -> str | None:
    # Only objects this program made: its classes, their instances, its generated code's
    # functions and namespaces are gone, so code objects are counted by file name.
    if isinstance(obj, type) and issubclass(obj, Base):
        return "class:" + obj.__name__
    if isinstance(obj, Base):
        return "instance:" + type(obj).__name__
    if type(obj).__name__ == "code" and obj.co_filename.startswith("<generated"):
        return "code:" + obj.co_filename
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=600)
    args = parser.parse_args()
    kept = []
    total = 0
    for i in range(args.rounds):
        cls = make_class(i)
        total += describe(cls)[1] if i % 2 == 0 else len(describe_recent(cls))
        if i % 10 == 0:
            kept.append(cls())
        total += compile_and_run(i)
        del cls
    gc.collect()
    counts: dict[str, int] = {}
    for obj in gc.get_objects():
        kind = own_kind(obj)
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    first_key = type(kept[0])
    refcounts = {
        "kept_class": sys.getrefcount(first_key),
        "kept_instance": sys.getrefcount(kept[0]),
        "describe": sys.getrefcount(describe),
        "describe_recent": sys.getrefcount(describe_recent),
        "Base": sys.getrefcount(Base),
        "make_class_code": sys.getrefcount(make_class.__code__),
    }
    line = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    refs = " ".join(f"{k}={v}" for k, v in sorted(refcounts.items()))
    print(f"live_objects rounds={args.rounds} total={total} cache={describe.cache_info().currsize} "
          f"recent={describe_recent.cache_info().currsize} {line} refcounts: {refs}", flush=True)


if __name__ == "__main__":
    main()
