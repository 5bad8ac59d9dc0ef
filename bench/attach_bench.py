#!/usr/bin/env python3
"""growtrace attach / detach: how long each takes, and how much slower a process runs while attached.

Two targets, each in one run:

native   bench_malloc_heavy PAIRS (two threads of malloc/free pairs). Untraced run for its
         allocation rate; then a second run, attached 0.1 s after its start (--no-wait) and
         traced to its exit: the allocations the trace holds over the traced seconds give the
         rate while attached.
python   the openai #2672 reproduction (threads mode, --progress, venv python), one process:
         requests per second in a window before the attach, while attached (the agent running:
         stacks, cache insertions, classes) and after the detach (back to the first rate?).

Both attach as `growtrace attach` does by default, sampled (--sample 512K); --sample 0 attaches
with full tracing (the figures README.md gave before sampled mode). A sampled native trace holds
an estimate of the allocations made, from which the rate while attached is computed.

    python3 bench/attach_bench.py [--build build] [--pairs 20000000] [--window 6] [--sample 512K]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def run_timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"attach_bench: {' '.join(cmd)} failed:\n{proc.stderr}")
    return time.perf_counter() - start


def native(growtrace: str, program: str, pairs: int, work: str, sample: str) -> None:
    start = time.perf_counter()
    subprocess.run([program, str(pairs)], check=True, stdout=subprocess.DEVNULL)
    untraced_s = time.perf_counter() - start
    untraced_rate = 2 * pairs / untraced_s  # two threads, one allocation per pair

    trace = os.path.join(work, "native.gtrace")
    proc = subprocess.Popen([program, str(pairs)], stdout=subprocess.DEVNULL)
    time.sleep(0.1)
    attach_s = run_timed([growtrace, "attach", str(proc.pid), "--sample", sample, "-o", trace, "--no-wait"])
    proc.wait()
    report = json.loads(subprocess.run([growtrace, "analyze", "--json", trace], check=True, capture_output=True,
                                       text=True).stdout)
    allocations = report["totals"]["allocations"]
    attached_rate = allocations / max(report["duration_s"], 1e-9)
    print(f"native  bench_malloc_heavy {pairs} (--sample {sample}): untraced {untraced_rate / 1e6:.2f} M allocations/s; attached "
          f"{attached_rate / 1e6:.2f} M/s ({allocations / 1e6:.1f} M traced): {untraced_rate / attached_rate:.1f}x "
          f"slower while attached; attach took {attach_s:.1f} s")


class Progress:
    """Timestamps of the repro's 'request N' lines."""

    def __init__(self, proc: subprocess.Popen):
        self.times: list[float] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            if line.startswith("request "):
                with self.lock:
                    self.times.append(time.perf_counter())

    def rate(self, seconds: float) -> float:
        """Requests per second over the next `seconds`."""
        with self.lock:
            before = len(self.times)
        start = time.perf_counter()
        time.sleep(seconds)
        with self.lock:
            return (len(self.times) - before) / (time.perf_counter() - start)


def python(growtrace: str, python_exe: str, repro: str, window: float, work: str, sample: str) -> None:
    proc = subprocess.Popen([python_exe, repro, "--mode", "threads", "--requests", "1000000", "--interval", "0",
                             "--progress"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        progress = Progress(proc)
        while len(progress.times) < 5:  # past the imports and the first requests
            time.sleep(0.2)
        before = progress.rate(window)
        trace = os.path.join(work, "python.gtrace")
        attach_s = run_timed([growtrace, "attach", str(proc.pid), "--sample", sample, "-o", trace, "--no-wait"])
        attached = progress.rate(window)
        detach_s = run_timed([growtrace, "detach", str(proc.pid)])
        after = progress.rate(window)
    finally:
        proc.kill()
        proc.wait()
    print(f"python  openai repro (threads, --sample {sample}): {before:.1f} requests/s before, {attached:.1f} attached "
          f"({before / max(attached, 1e-9):.1f}x slower), {after:.1f} after the detach; attach took {attach_s:.1f} s, "
          f"detach {detach_s:.1f} s")


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--pairs", type=int, default=20_000_000)
    parser.add_argument("--window", type=float, default=6.0, help="seconds per measuring window (python)")
    parser.add_argument("--sample", default="512K", help="attach's --sample SIZE (0: every allocation)")
    args = parser.parse_args()
    growtrace = os.path.join(args.build, "bin", "growtrace")
    program = os.path.join(args.build, "bin", "bench_malloc_heavy")
    python_exe = os.path.join(root, ".venv", "bin", "python")
    repro = os.path.join(root, "test_programs", "python", "openai_repro", "repro.py")
    for path in (growtrace, program, python_exe):
        if not os.path.exists(path):
            sys.exit(f"attach_bench: {path} is missing (run tools/setup.sh)")
    with tempfile.TemporaryDirectory(prefix="growtrace-attach-bench-") as work:
        native(growtrace, program, args.pairs, work, args.sample)
        python(growtrace, python_exe, repro, args.window, work, args.sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())
