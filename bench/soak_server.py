"""A long-running service with the openai #2672 growth, for bench/soak.py.

An HTTP server on 127.0.0.1: the main thread accepts connections and queues their requests;
a pool of worker threads serves them, each calling ``client.responses.parse(...,
text_format=Fact)`` against the mock OpenAI server (test_programs/python/openai_repro/
mock_server.py, another process, also on 127.0.0.1). Every Nth request a worker retires after
answering and the pool starts a new thread in its place, as servers that recycle workers do.
pydantic's cache of parametrized generic classes is per thread, so each new worker builds a
fresh ``ParsedResponseOutputMessage[Fact]``, and openai's unbounded ``_CachedTypeAdapter``
``lru_cache`` gains two entries for ever: the growth comes only with new threads.

    python soak_server.py --upstream-port P [--workers 4] [--replace-every 20] [--port-file F]

``POST /parse`` answers ``{"fact": ..., "cache": <entries>}``; ``GET /stats`` the counters.
SIGTERM or SIGINT stops it cleanly (exit status 0).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import queue
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test_programs", "python", "openai_repro"))

from openai import OpenAI  # noqa: E402
from openai._models import _CachedTypeAdapter  # noqa: E402
from pydantic import BaseModel  # noqa: E402


class Fact(BaseModel):
    fact: str


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.served = 0
        self.errors = 0
        self.workers_started = 0

    def snapshot(self) -> dict:
        with self.lock:
            return {"served": self.served, "errors": self.errors, "workers_started": self.workers_started,
                    "cache_entries": _CachedTypeAdapter.cache_info().currsize}


class Handler(BaseHTTPRequestHandler):
    """Parses one request on the worker's thread (no server thread of its own)."""

    protocol_version = "HTTP/1.1"
    client: OpenAI
    stats: Stats

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length", "0"))
        if length:
            self.rfile.read(length)
        try:
            parsed = self.client.responses.parse(model="gpt-4o-mini", input="Tell me one short fact.",
                                                 text_format=Fact).output_parsed
            body = {"fact": parsed.fact, "cache": _CachedTypeAdapter.cache_info().currsize}
            status = 200
        except Exception as exc:  # reported to the driver, the service goes on
            body = {"error": f"{type(exc).__name__}: {exc}"}
            status = 500
        with self.stats.lock:
            self.stats.served += 1
            self.stats.errors += status != 200
        self._send(status, body)

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, self.stats.snapshot())

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream-port", type=int, required=True, help="port of mock_server.py")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", help="write the listening port here once ready")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--replace-every", type=int, default=20,
                        help="a worker retires after every Nth request the pool serves (0: never)")
    args = parser.parse_args(argv)

    Handler.client = OpenAI(base_url=f"http://127.0.0.1:{args.upstream_port}/v1", api_key="test", max_retries=0)
    Handler.stats = stats = Stats()
    listener = socket.create_server(("127.0.0.1", args.port))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]

    connections: queue.Queue = queue.Queue()
    stop = threading.Event()
    counter = itertools.count(1)

    def worker() -> None:
        # Serves connections (one request each) until it is told to retire.
        while not stop.is_set():
            try:
                conn, addr = connections.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                Handler(conn, addr, None)
            except OSError:
                pass
            finally:
                conn.close()
            if args.replace_every and next(counter) % args.replace_every == 0:
                start_worker()  # a new thread takes this one's place
                return

    def start_worker() -> None:
        with stats.lock:
            stats.workers_started += 1
            n = stats.workers_started
        threading.Thread(target=worker, name=f"worker-{n}", daemon=True).start()

    for _ in range(args.workers):
        start_worker()

    def on_signal(signo, frame) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.replace(args.port_file + ".tmp", args.port_file)
    print(f"PORT {port}", flush=True)
    while not stop.is_set():
        try:
            conn, addr = listener.accept()
        except (socket.timeout, InterruptedError):
            continue
        except OSError:
            if stop.is_set():
                break
            raise
        conn.settimeout(30)
        connections.put((conn, addr))
    listener.close()
    print("soak_server " + " ".join(f"{k}={v}" for k, v in stats.snapshot().items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
