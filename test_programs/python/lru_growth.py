"""A standard-library copy of the openai-python #2672 pattern: an unbounded lru_cache
keyed on classes that are generated afresh in every thread.

``parametrize(origin, arg)`` plays pydantic 2.12's parametrized-generic factory: it builds a
class named ``ParsedMessage[Fact]`` with ``type()`` and caches it in a *thread-local* dict,
so every new thread gets a new class with the same name. ``adapter_for`` plays openai's
``_CachedTypeAdapter``: ``functools.lru_cache(maxsize=None)`` whose value is a sizeable
object graph (a "schema" of ~100 small dicts and a 16 KiB buffer, ~70 KiB). Each request
asks for two adapters keyed on the generated classes (one on a ``typing.Union`` of them,
like openai does), so in ``--mode threads`` (one new thread per request) the cache gains two
entries per request for ever; in ``--mode single`` it stops growing after the first request.

``--buffer BYTES`` (default 16384) sizes each value's buffer and ``--class-payload BYTES``
(default 0) gives each generated class a bytes attribute of that size, allocated in
``parametrize``: a sampled trace (``growtrace run --sample``) needs more bytes in each growing
stack to judge it than a full one.
"""

import argparse
import functools
import os
import sys
import threading
import time
import typing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402


class Fact:
    fact: str


class ParsedMessage:
    pass


class ParsedText:
    pass


class ToolCall:
    pass


_parametrized = threading.local()  # per-thread, like a context-local cache
_BUFFER_BYTES = 16384  # --buffer
_CLASS_PAYLOAD = 0  # --class-payload


def parametrize(origin: type, arg: type) -> type:
    cache = _parametrized.__dict__.setdefault("cache", {})
    try:
        return cache[origin, arg]
    except KeyError:
        pass
    namespace = {"__module__": origin.__module__, "__args__": (arg,), "__origin__": origin}
    if _CLASS_PAYLOAD:
        namespace["__payload__"] = bytes(_CLASS_PAYLOAD)  # mark: class_payload
    cls = type(f"{origin.__name__}[{arg.__name__}]", (origin,), namespace)  # mark: type_created
    cache[origin, arg] = cls
    return cls


def build_adapter(tp: object) -> dict:
    fields = {
        f"field_{j}": {"name": f"field_{j}", "alias": None, "path": [str(tp.__class__), j], "doc": "d" * 200}
        for j in range(100)
    }
    return {"type": tp, "fields": fields, "buffer": bytearray(_BUFFER_BYTES)}


@functools.lru_cache(maxsize=None)  # mark: cache_created
def adapter_for(tp: object) -> dict:
    return build_adapter(tp)  # mark: cache_compute


def handle_request(results: list) -> None:
    message_t = parametrize(ParsedMessage, Fact)
    text_t = parametrize(ParsedText, Fact)
    outer = adapter_for(typing.Union[message_t, ToolCall])  # mark: cache_call_union
    inner = adapter_for(text_t)  # mark: cache_call_class
    results.append(len(outer["fields"]) + len(inner["fields"]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("threads", "single"), default="threads")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--interval", type=float, default=0.005, help="seconds between requests")
    parser.add_argument("--buffer", type=int, default=16384, help="bytes of each cached value's buffer")
    parser.add_argument("--class-payload", type=int, default=0, help="bytes held by each generated class")
    args = parser.parse_args()
    global _BUFFER_BYTES, _CLASS_PAYLOAD
    _BUFFER_BYTES, _CLASS_PAYLOAD = args.buffer, args.class_payload
    summary = Summary("lru_growth")
    results: list = []
    next_start = time.monotonic()
    for i in range(args.requests):
        delay = next_start - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        next_start += args.interval
        if args.mode == "threads":
            t = threading.Thread(target=handle_request, args=(results,), name=f"request-{i}")
            t.start()
            t.join()
        else:
            handle_request(results)
    summary["mode"] = args.mode
    summary["requests"] = args.requests
    summary["cache"] = adapter_for.cache_info()
    summary["checksum"] = sum(results)
    summary.print()


if __name__ == "__main__":
    main()
