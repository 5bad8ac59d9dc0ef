#!/usr/bin/env python3
"""Memory bounds of growtrace.

1. The analyzer's peak RSS on a trace of ~50 million events (bench_malloc_heavy PAIRS under
   `growtrace run`: two threads x PAIRS x (malloc + free)), with its wall time.
2. The tracer's own memory in the target: peak RSS of a program with and without the tracer,
   (a) few live allocations and a growing number of events (gt_stress churn N), and
   (b) a growing number of live allocations (gt_stress live N). The tracer's overhead should
   stay flat in (a) and grow with the live count in (b).

Peak RSS is /usr/bin/time's maximum resident set size of one process: the analyzer, or the
program with the library preloaded directly.

    python3 bench/memory_bench.py [--build build-robust] [--pairs 12500000] [--quick]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time


def run_measured(cmd: list[str], env: dict | None = None) -> tuple[int, float, int]:
    """(exit status, wall seconds, peak RSS in KiB) of one process.

    Measured by /usr/bin/time around `env VARS... cmd`: ru_maxrss survives exec, so the
    process must be forked from something small (not from this Python), and the tracer's
    variables are set by env(1) so /usr/bin/time itself is not traced."""
    extra = [f"{k}={v}" for k, v in (env or {}).items()]
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%M", "env"] + extra + cmd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.perf_counter() - start
        lines = [l for l in out.read().splitlines() if l.strip()]
    if proc.returncode != 0:
        sys.stderr.write(f"memory_bench: {' '.join(cmd)} exited {proc.returncode}\n"
                         f"{proc.stderr.decode(errors='replace')}")
    return proc.returncode, wall, int(lines[-1]) if lines and lines[-1].isdigit() else 0


def mib(kib: float) -> str:
    return f"{kib / 1024:.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--build", default=os.path.join(root, "build-robust"))
    parser.add_argument("--pairs", type=int, default=12_500_000, help="bench_malloc_heavy pairs per thread")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--skip-analyzer", action="store_true", help="only the tracer's overhead (part 2)")
    parser.add_argument("--skip-tracer", action="store_true", help="only the analyzer (part 1)")
    args = parser.parse_args()

    bindir = os.path.join(args.build, "bin")
    growtrace = os.path.join(bindir, "growtrace")
    heavy = os.path.join(bindir, "bench_malloc_heavy")
    stress = os.path.join(bindir, "gt_stress")
    library = os.path.join(args.build, "lib", "libgrowtrace.so")
    needed = ([] if args.skip_analyzer else [growtrace, heavy]) + ([] if args.skip_tracer else [stress, library])
    for path in needed:
        if not os.path.exists(path):
            sys.exit(f"memory_bench: {path} is missing; build growtrace_cli growtrace_preload "
                     "bench_malloc_heavy gt_stress first")
    pairs = 200_000 if args.quick else args.pairs
    work = tempfile.mkdtemp(prefix="growtrace-membench-")
    try:
        # --- 1. the analyzer on ~50 M events ---
        if not args.skip_analyzer:
            analyzer_part(growtrace, heavy, pairs, work)
        if not args.skip_tracer:
            tracer_part(stress, library, work, args.quick)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def analyzer_part(growtrace: str, heavy: str, pairs: int, work: str) -> None:
    trace = os.path.join(work, "heavy.gtrace")
    events = 4 * pairs
    status, wall, _ = run_measured([growtrace, "run", "-o", trace, "--", heavy, str(pairs)])
    if status != 0:
        sys.exit(1)
    size = os.path.getsize(trace)
    print(f"analyzer: trace of {events / 1e6:.1f} M events, {size / 2**20:.1f} MiB "
          f"({size / events:.2f} B/event), traced run {wall:.1f} s")
    status, wall, peak = run_measured([growtrace, "analyze", trace, "--json", "-o", trace + ".json"])
    print(f"analyzer: analyze --json peak RSS {mib(peak)}, {wall:.1f} s")
    status, wall, peak = run_measured([growtrace, "dump", trace])
    print(f"analyzer: dump peak RSS {mib(peak)}, {wall:.1f} s")
    os.unlink(trace)


def tracer_part(stress: str, library: str, work: str, quick: bool) -> None:
    # --- 2. the tracer's memory in the target ---
    def target(mode_args: list[str]) -> tuple[int, int, float, float]:
        plain = run_measured([stress] + mode_args)
        env = {"LD_PRELOAD": library, "GROWTRACE_OUTPUT": os.path.join(work, "t.gtrace")}
        traced = run_measured([stress] + mode_args, env)
        for name in os.listdir(work):
            if name.startswith("t.") or name == "t.gtrace":
                os.unlink(os.path.join(work, name))
        return plain[2], traced[2], plain[1], traced[1]

    print("tracer, few live allocations, growing event count (gt_stress churn N):")
    print(f"  {'events':>12} {'untraced':>12} {'traced':>12} {'overhead':>12}")
    for n in ([300_000, 1_000_000] if quick else [1_000_000, 4_000_000, 16_000_000, 64_000_000]):
        plain, traced, _, _ = target(["churn", str(n)])
        # churn N makes N malloc/free pairs: 2N events
        print(f"  {2 * n:>12,} {mib(plain):>12} {mib(traced):>12} {mib(traced - plain):>12}")

    print("tracer, growing live allocations of 64 B (gt_stress live N 1000000):")
    print(f"  {'live':>12} {'untraced':>12} {'traced':>12} {'overhead':>12} {'per live':>10}")
    for n in ([10_000, 100_000] if quick else [10_000, 100_000, 1_000_000, 4_000_000]):
        plain, traced, _, _ = target(["live", str(n), "1000000"])
        print(f"  {n:>12,} {mib(plain):>12} {mib(traced):>12} {mib(traced - plain):>12} "
              f"{(traced - plain) * 1024 / n:>8.1f} B")


if __name__ == "__main__":
    sys.exit(main())
