#!/usr/bin/env python3
"""Native overhead benchmark: no tracer vs heaptrack vs growtrace, side by side in one run.

Workload: bench_malloc_heavy (two threads, PAIRS malloc/free pairs each, sizes 16 B..2 KiB,
call depths 1-9). For each tool it reports wall and CPU time and the slowdown against the
untraced run (median of --repeat runs), the trace size in bytes per event, and the time to
analyse the trace (growtrace analyze vs heaptrack_print).

    python3 bench/native_bench.py [--build build] [--pairs 2000000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user+sys of the children) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def median_run(make_cmd, repeat: int, cleanup=None) -> tuple[float, float]:
    walls, cpus = [], []
    for i in range(repeat):
        if cleanup:
            cleanup()
        wall, cpu = timed(*make_cmd(i))
        walls.append(wall)
        cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--pairs", type=int, default=2_000_000, help="malloc/free pairs per thread")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    program = os.path.join(args.build, "bin", "bench_malloc_heavy")
    growtrace = os.path.join(args.build, "bin", "growtrace")
    for path in (program, growtrace):
        if not os.path.exists(path):
            sys.exit(f"native_bench: {path} is missing; build first (tools/setup.sh)")
    events = 4 * args.pairs  # two threads x (malloc + free)
    work = tempfile.mkdtemp(prefix="growtrace-bench-")
    gt_trace = os.path.join(work, "bench.gtrace")
    ht_base = os.path.join(work, "bench.heaptrack")

    rows = []
    base_wall, base_cpu = median_run(lambda i: ([program, str(args.pairs)],), args.repeat)
    rows.append(("untraced", base_wall, base_cpu, None, None))

    have_heaptrack = shutil.which("heaptrack") is not None
    if have_heaptrack:
        def clean_ht():
            for f in os.listdir(work):
                if f.startswith("bench.heaptrack"):
                    os.remove(os.path.join(work, f))
        wall, cpu = median_run(lambda i: (["heaptrack", "-o", ht_base, program, str(args.pairs)],), args.repeat,
                               clean_ht)
        ht_file = next(os.path.join(work, f) for f in os.listdir(work) if f.startswith("bench.heaptrack"))
        ht_size = os.path.getsize(ht_file)
        t0 = time.perf_counter()
        subprocess.run(["heaptrack_print", ht_file], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ht_analyze = time.perf_counter() - t0
        rows.append(("heaptrack", wall, cpu, ht_size, ht_analyze))

    def clean_gt():
        if os.path.exists(gt_trace):
            os.remove(gt_trace)
    wall, cpu = median_run(lambda i: ([growtrace, "run", "-o", gt_trace, "--", program, str(args.pairs)],),
                           args.repeat, clean_gt)
    gt_size = os.path.getsize(gt_trace)
    t0 = time.perf_counter()
    subprocess.run([growtrace, "analyze", gt_trace, "--json", "-o", os.path.join(work, "report.json")], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gt_analyze = time.perf_counter() - t0
    rows.append(("growtrace", wall, cpu, gt_size, gt_analyze))

    print(f"workload: bench_malloc_heavy, 2 threads x {args.pairs} malloc/free pairs ({events} events), "
          f"median of {args.repeat} runs, {os.cpu_count()} cores")
    print(f"{'tool':<11} {'wall s':>8} {'cpu s':>8} {'slowdown':>9} {'cpu ratio':>9} {'trace B':>12} "
          f"{'B/event':>8} {'analyze s':>10}")
    for name, wall, cpu, size, analyze in rows:
        size_text = f"{size:>12}" if size is not None else f"{'-':>12}"
        per_event = f"{size / events:>8.2f}" if size is not None else f"{'-':>8}"
        analyze_text = f"{analyze:>10.2f}" if analyze is not None else f"{'-':>10}"
        print(f"{name:<11} {wall:>8.3f} {cpu:>8.3f} {wall / base_wall:>8.1f}x {cpu / base_cpu:>8.1f}x "
              f"{size_text} {per_event} {analyze_text}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
