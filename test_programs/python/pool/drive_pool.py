"""Runs openai_app.py in gunicorn under ``growtrace run`` and drives it on 127.0.0.1.

Starts the mock OpenAI server (a thread of this process, untraced), then
``growtrace run -o TRACE -- python -m gunicorn --workers N ... openai_app:application``; waits
until the pool answers, sends --requests requests from --concurrency threads (so that every
worker gets its share), then sends SIGTERM to growtrace, which passes it to the gunicorn
master: the workers finish their request and exit, and every trace ends cleanly.

    python drive_pool.py --growtrace build/bin/growtrace --trace /tmp/pool.gtrace [--fix]

Prints ``pool requests=... ok=... pids=PID,PID`` (the workers that answered) and exits 0 if
every request succeeded and growtrace exited 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "openai_repro"))

import mock_server  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_listening(port: int, proc: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"drive_pool: gunicorn exited early with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"drive_pool: nothing listens on 127.0.0.1:{port} after {seconds} s")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--growtrace", required=True)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--interval", type=float, default=0.02, help="pause of each sender between requests")
    parser.add_argument("--fix", action="store_true", help="GT_APP_FIX=1: the app's calls share one thread")
    args = parser.parse_args()

    server, mock_port = mock_server.start_in_thread()
    port = free_port()
    env = dict(os.environ, OPENAI_BASE_URL=f"http://127.0.0.1:{mock_port}/v1", GT_APP_FIX="1" if args.fix else "0")
    command = [args.growtrace, "run", "-o", args.trace, "--", sys.executable, "-m", "gunicorn",
               "--workers", str(args.workers), "--worker-class", "sync", "--timeout", "120",
               "--bind", f"127.0.0.1:{port}", "--chdir", HERE, "openai_app:application"]
    proc = subprocess.Popen(command, env=env)
    pids: dict = {}
    failures: list = []
    lock = threading.Lock()
    try:
        wait_until_listening(port, proc, 60)
        counter = iter(range(args.requests))

        def sender() -> None:
            for _ in counter:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=120) as response:
                        answer = json.loads(response.read())
                    with lock:
                        pids[answer["pid"]] = pids.get(answer["pid"], 0) + 1
                        failures.extend(answer["errors"])
                except Exception as exc:  # reported below, the run goes on
                    with lock:
                        failures.append(f"{type(exc).__name__}: {exc}")
                time.sleep(args.interval)

        senders = [threading.Thread(target=sender) for _ in range(args.concurrency)]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            status = proc.wait()
        server.shutdown()
    ok = sum(pids.values())
    print(f"pool requests={args.requests} ok={ok} pids={','.join(str(p) for p in sorted(pids))} "
          f"per_worker={','.join(str(pids[p]) for p in sorted(pids))}", flush=True)
    if failures:
        print(f"drive_pool: {len(failures)} failures, first: {failures[0]}", file=sys.stderr)
    # growtrace passes SIGTERM on: gunicorn exits 0 on it, so growtrace's status is gunicorn's.
    return 0 if not failures and status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
