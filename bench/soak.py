#!/usr/bin/env python3
"""Soak scenario for sampled mode: a service with the openai #2672 growth, traced for
a long time with `growtrace run --sample` and then, a fresh copy, with `growtrace attach`.

The service is bench/soak_server.py (a pool of worker threads calling `client.responses.parse`,
one worker replaced by a new thread every --replace-every requests: the growth comes only with
new threads) against the mock OpenAI server, everything on 127.0.0.1. A driver sends --rate
requests per second for --minutes in each phase:

  run     growtrace run --sample SIZE -o soak-run.gtrace -- python soak_server.py ...
  attach  python soak_server.py ... started untraced; growtrace attach PID --sample SIZE
          --duration MINUTES*60 right away

Every --check-every seconds the trace written so far (cut at its last whole block) is analysed
with `growtrace analyze --json`; the verdict is whether openai._models._CachedTypeAdapter is a
cache_growth finding. At the end of a phase the service is stopped (SIGTERM; attach detaches
first) and the whole trace is analysed under /usr/bin/time. Results go to OUT/soak.json and a
summary to OUT/soak.txt:

  trace bytes per hour (from the size at each check, after the first 5 minutes), analysis
  wall/CPU time and peak RSS of the final trace, and the minute after which the verdict
  appeared and stayed.

    python3 bench/soak.py [--minutes 30] [--rate 4] [--sample 512K] [--out /tmp/growtrace-soak]
                          [--phases run,attach]

It stops by itself (each phase ends after --minutes; a hard limit kills what is left).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
MOCK = os.path.join(ROOT, "test_programs", "python", "openai_repro", "mock_server.py")
SERVER = os.path.join(ROOT, "bench", "soak_server.py")
CACHE = "openai._models._CachedTypeAdapter"


def log(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def wait_for_file(path: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                text = f.read().strip()
            if text:
                return text
        time.sleep(0.1)
    raise RuntimeError(f"{path} did not appear within {timeout} s")


def whole_blocks(src: str, dst: str) -> int:
    """Copies the trace up to its last complete block (it is being written); returns the size."""
    with open(src, "rb") as f:
        data = f.read()
    end = 16 if len(data) >= 16 else 0
    pos = end
    while pos + 16 <= len(data):
        stored = struct.unpack_from("<I", data, pos + 8)[0]
        if pos + 16 + stored > len(data):
            break
        pos += 16 + stored
        end = pos
    with open(dst, "wb") as f:
        f.write(data[:end])
    return end


class Driver:
    """Sends `rate` requests per second, each on a new connection, until stopped."""

    def __init__(self, port: int, rate: float) -> None:
        self.port, self.rate = port, rate
        self.sent = self.ok = self.failed = 0
        self.cache_entries = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        interval = 1.0 / self.rate
        next_t = time.monotonic()
        while not self.stop.is_set():
            delay = next_t - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)
            next_t = max(next_t + interval, time.monotonic() - 1.0)  # no burst after a stall
            self.sent += 1
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                conn.request("POST", "/parse", body=b"{}", headers={"Connection": "close"})
                resp = conn.getresponse()
                body = json.loads(resp.read() or b"{}")
                conn.close()
                if resp.status == 200:
                    self.ok += 1
                    self.cache_entries = body.get("cache", self.cache_entries)
                else:
                    self.failed += 1
            except (OSError, http.client.HTTPException, ValueError):
                self.failed += 1


def analyze(growtrace: str, trace: str, report: str, timed: bool = False) -> dict:
    cmd = [growtrace, "analyze", trace, "--json", "-o", report]
    stats = {}
    if timed:
        cmd = ["/usr/bin/time", "-f", "TIME %e %U %S %M"] + cmd
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    stats["wall_s"] = time.monotonic() - t0
    if timed:
        m = re.search(r"TIME ([\d.]+) ([\d.]+) ([\d.]+) (\d+)", r.stderr)
        if m:
            stats.update(wall_s=float(m.group(1)), cpu_s=float(m.group(2)) + float(m.group(3)),
                         max_rss_mb=int(m.group(4)) / 1024)
    if r.returncode != 0:
        stats["error"] = r.stderr.strip()[-500:]
        return stats
    with open(report) as f:
        doc = json.load(f)
    finding = next((f for f in doc["findings"] if f["kind"] == "cache_growth" and f["cache"]["name"] == CACHE), None)
    stats["finding"] = finding is not None
    stats["findings"] = len(doc["findings"])
    stats["duration_s"] = doc["duration_s"]
    stats["samples"] = doc["totals"].get("samples")
    if finding:
        stats["entries"] = finding["cache"]["entries_last"]
        stats["retained_bytes"] = finding["retained_bytes"]
        stats["retained_bytes_stderr"] = finding.get("retained_bytes_stderr")
    return stats


def phase(name: str, args, work: str) -> dict:
    growtrace = os.path.join(args.build, "bin", "growtrace")
    trace = os.path.join(work, f"soak-{name}.gtrace")
    result = {"phase": name, "minutes": args.minutes, "rate": args.rate, "sample": args.sample,
              "replace_every": args.replace_every, "workers": args.workers, "checks": []}
    procs = []
    try:
        mock_port_file = os.path.join(work, f"{name}.mock.port")
        procs.append(subprocess.Popen([PYTHON, MOCK, "--port-file", mock_port_file], stdout=subprocess.DEVNULL))
        upstream = wait_for_file(mock_port_file, 30)
        port_file = os.path.join(work, f"{name}.port")
        server_cmd = [PYTHON, SERVER, "--upstream-port", upstream, "--port-file", port_file,
                      "--workers", str(args.workers), "--replace-every", str(args.replace_every)]
        server_log = open(os.path.join(work, f"{name}.server.log"), "w")
        if name == "run":
            server = subprocess.Popen([growtrace, "run", "--sample", args.sample, "-o", trace, "--"] + server_cmd,
                                      stdout=server_log, stderr=subprocess.STDOUT)
        else:
            server = subprocess.Popen(server_cmd, stdout=server_log, stderr=subprocess.STDOUT)
        procs.append(server)
        port = int(wait_for_file(port_file, 120))
        t_start = time.monotonic()
        attach = None
        if name == "attach":
            # The service runs a little first, as a service being attached to would.
            warm = Driver(port, args.rate)
            warm.thread.start()
            time.sleep(10)
            warm.stop.set()
            warm.thread.join()
            attach_log = open(os.path.join(work, "attach.log"), "w")
            attach = subprocess.Popen([growtrace, "attach", str(server.pid), "--sample", args.sample, "-o", trace,
                                       "--duration", str(int(args.minutes * 60))],
                                      stdout=attach_log, stderr=subprocess.STDOUT)
            procs.append(attach)
            deadline = time.monotonic() + 120
            while not os.path.exists(trace) and time.monotonic() < deadline:
                time.sleep(0.2)
            t_start = time.monotonic()
        driver = Driver(port, args.rate)
        driver.thread.start()
        log(f"{name}: service pid {server.pid} on port {port}, tracing to {trace}")
        snap = os.path.join(work, f"{name}.snapshot.gtrace")
        end_at = t_start + args.minutes * 60
        next_check = t_start + args.check_every
        while time.monotonic() < end_at:
            time.sleep(max(0.0, min(next_check, end_at) - time.monotonic()))
            if time.monotonic() < next_check:
                continue
            next_check += args.check_every
            elapsed = time.monotonic() - t_start
            size = whole_blocks(trace, snap) if os.path.exists(trace) else 0
            check = {"minute": round(elapsed / 60, 2), "trace_bytes": size, "requests_ok": driver.ok,
                     "requests_failed": driver.failed, "cache_entries": driver.cache_entries}
            if size > 16:
                check.update(analyze(growtrace, snap, snap + ".json"))
            result["checks"].append(check)
            log(f"{name}: {json.dumps(check)}")
        driver.stop.set()
        driver.thread.join(timeout=90)
        result["requests_ok"], result["requests_failed"] = driver.ok, driver.failed
        if attach:
            attach.wait(timeout=300)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=300)
        result["seconds"] = time.monotonic() - t_start
        result["trace_bytes"] = os.path.getsize(trace)
        result["final"] = analyze(growtrace, trace, trace + ".json", timed=True)
        log(f"{name}: final {json.dumps(result['final'])}")
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.kill()
                p.wait()

    # Growth of the trace once the start-up (imports, first stacks) is behind: a line through
    # the checks after the first five minutes.
    pts = [(c["minute"], c["trace_bytes"]) for c in result["checks"] if c["minute"] >= 5 and c["trace_bytes"]]
    if len(pts) >= 2:
        n = len(pts)
        mx = sum(x for x, _ in pts) / n
        my = sum(y for _, y in pts) / n
        sxx = sum((x - mx) ** 2 for x, _ in pts)
        slope = sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else 0
        result["trace_mb_per_hour"] = slope * 60 / 1e6
    result["trace_mb_per_hour_overall"] = result["trace_bytes"] / 1e6 / (result["seconds"] / 3600)
    # The verdict appeared and stayed: the first check from which every later one has the finding.
    stayed = None
    for c in reversed(result["checks"]):
        if not c.get("finding"):
            break
        stayed = c["minute"]
    result["verdict_stays_from_minute"] = stayed
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=float, default=4, help="requests per second")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--replace-every", type=int, default=20)
    parser.add_argument("--sample", default="512K")
    parser.add_argument("--check-every", type=float, default=60, help="seconds between analyses of the trace so far")
    parser.add_argument("--phases", default="run,attach")
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "growtrace-soak"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    # A hard limit: the scenario must stop by itself whatever happens.
    limit = (args.minutes * 60 + 900) * len(args.phases.split(","))
    signal.signal(signal.SIGALRM, lambda *_: (log("hard time limit reached"), os._exit(5)))
    signal.alarm(int(limit))

    results = []
    for name in args.phases.split(","):
        results.append(phase(name, args, args.out))
        with open(os.path.join(args.out, "soak.json"), "w") as f:
            json.dump(results, f, indent=1)
    lines = []
    for r in results:
        fin = r.get("final", {})
        lines.append(
            f"{r['phase']:6} {r['minutes']:.0f} min at {r['rate']} req/s (--sample {r['sample']}, a new worker "
            f"thread every {r['replace_every']} requests): {r.get('requests_ok')} requests ok, "
            f"{r.get('requests_failed')} failed; trace {r['trace_bytes'] / 1e6:.2f} MB, "
            f"{r.get('trace_mb_per_hour', float('nan')):.2f} MB/h after the first 5 min "
            f"({r['trace_mb_per_hour_overall']:.2f} MB/h overall); analysis {fin.get('wall_s', float('nan')):.2f} s wall, "
            f"{fin.get('cpu_s', float('nan')):.2f} s CPU, {fin.get('max_rss_mb', float('nan')):.0f} MB peak RSS; "
            f"finding {CACHE}: {fin.get('finding')}, {fin.get('entries')} entries, "
            f"{(fin.get('retained_bytes') or 0) / 1e6:.1f} MB +- {(fin.get('retained_bytes_stderr') or 0) / 1e6:.1f} MB; "
            f"verdict present from minute {r['verdict_stays_from_minute']} on (checked every "
            f"{args.check_every:.0f} s)")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "soak.txt"), "w") as f:
        f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
