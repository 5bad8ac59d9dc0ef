"""Reproduction of openai-python issue #2672 against a local mock server.

``client.responses.parse(..., text_format=Fact)`` run once per NEW thread makes pydantic
2.12 build a fresh ``ParsedResponseOutputMessage[Fact]`` class per thread (its cache of
parametrized generics is context-local), and openai's unbounded
``functools.lru_cache`` ``openai._models._CachedTypeAdapter`` gains entries keyed on
unions of those classes: it grows for ever. In a single thread it stays constant.

    python repro.py --mode threads --requests 150
    python repro.py --mode single  --requests 150
    python repro.py --mode threads --requests 150 --port 8123   # use a running mock_server.py
    python repro.py --mode threads --requests 100000 --progress  # a service to attach to
    python repro.py --mode threads --requests 100000000 --duration 3600  # an hour of it

Prints one summary line at the end:
    repro mode=threads requests=150 cache_currsize=... cache_misses=... cache_hits=...
          rss_start_kib=... rss_end_kib=... rss_per_request_kib=... seconds=...
(``--json PATH`` also writes the figures as JSON.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psutil  # noqa: E402
from openai import OpenAI  # noqa: E402
from openai._models import _CachedTypeAdapter  # noqa: E402
from pydantic import BaseModel  # noqa: E402

import mock_server  # noqa: E402


class Fact(BaseModel):
    fact: str


def rss_kib() -> int:
    return psutil.Process().memory_info().rss // 1024


def one_request(client: OpenAI, errors: list) -> None:
    try:
        response = client.responses.parse(
            model="gpt-4o-mini",
            input="Tell me one short fact.",
            text_format=Fact,
        )
        parsed = response.output_parsed
        if not isinstance(parsed, Fact) or not parsed.fact:
            errors.append(f"unexpected output_parsed: {parsed!r}")
    except Exception as exc:  # collected and reported, the run goes on
        errors.append(f"{type(exc).__name__}: {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="openai-python #2672 reproduction")
    parser.add_argument("--mode", choices=("threads", "single"), default="threads")
    parser.add_argument("--requests", type=int, default=150)
    parser.add_argument("--batch", type=int, default=1,
                        help="threads mode: start this many threads, then join them (default 1)")
    parser.add_argument("--interval", type=float, default=0.01,
                        help="seconds between request starts (pacing; 0 = as fast as possible)")
    parser.add_argument("--port", type=int, help="port of a running mock_server.py (default: start one)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="requests in the main thread before measuring (imports, first-use caches)")
    parser.add_argument("--duration", type=float, default=0,
                        help="stop after this many seconds of requests, even before --requests (0: no limit)")
    parser.add_argument("--json", help="also write the summary as JSON to this file")
    parser.add_argument("--progress", action="store_true",
                        help="print 'request N cache_currsize=M' after each request (for growtrace attach)")
    args = parser.parse_args(argv)

    server = None
    port = args.port
    if port is None:
        server, port = mock_server.start_in_thread()
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test", max_retries=0)

    errors: list[str] = []
    for _ in range(args.warmup):
        one_request(client, errors)

    cache_start = _CachedTypeAdapter.cache_info()
    rss_start = rss_kib()
    t0 = time.monotonic()
    done = 0
    next_start = t0
    while done < args.requests and not (args.duration > 0 and time.monotonic() - t0 >= args.duration):
        if args.interval > 0:
            delay = next_start - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        if args.mode == "single":
            one_request(client, errors)
            done += 1
            next_start += args.interval
        else:
            n = min(args.batch, args.requests - done)
            threads = [threading.Thread(target=one_request, args=(client, errors), name=f"req-{done + i}")
                       for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            done += n
            next_start += args.interval * n
        if args.progress:
            print(f"request {done} cache_currsize={_CachedTypeAdapter.cache_info().currsize}", flush=True)
    seconds = time.monotonic() - t0
    rss_end = rss_kib()
    info = _CachedTypeAdapter.cache_info()

    summary = {
        "mode": args.mode,
        "requests": done,
        "errors": len(errors),
        "cache_currsize_start": cache_start.currsize,
        "cache_currsize": info.currsize,
        "cache_hits": info.hits,
        "cache_misses": info.misses,
        "cache_growth_per_request": round((info.currsize - cache_start.currsize) / max(done, 1), 3),
        "rss_start_kib": rss_start,
        "rss_end_kib": rss_end,
        "rss_per_request_kib": round((rss_end - rss_start) / max(done, 1), 1),
        "seconds": round(seconds, 2),
    }
    print("repro " + " ".join(f"{k}={v}" for k, v in summary.items()), flush=True)
    if errors:
        print(f"repro: first error: {errors[0]}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f)
    if server is not None:
        server.shutdown()
        server.server_close()
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
