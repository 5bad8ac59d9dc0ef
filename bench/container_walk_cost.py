#!/usr/bin/env python3
"""What the CPython agent's container walks cost (docs/containers.md), on the openai #2672 reproduction.

The issue caps the walks at 2 % of the program's run time. Two figures, from the same runs:

  walk share   the walks' own CPU time, summed from the trace's Container records (each record
               carries its walk's CPU time, walk_ns; the records of one walk share it), over the
               run's wall time and over its CPU time (user+sys of the traced process);
  A/B          wall and CPU time of the traced run with walks (default) and without
               (GROWTRACE_CONTAINERS=0), interleaved pair by pair so that a change of the
               machine's load hits both alike; medians and their ratio.

A walk that found no container to report writes no record: the sum leaves it out (such a walk
measured nothing large, so it is a short one). The load average is printed with the figures:
on a loaded machine the A/B says little at the 2 % level, the walk share still holds (CPU
time of the walking thread).

    python3 bench/container_walk_cost.py [--build BUILD] [--python PY] [--requests 30] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTAINER = re.compile(r"\bContainer tid=(\d+) .*?\bflags=(\d+) walk_ns=(\d+) ")


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user+sys of the children) of one run, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"container_walk_cost: {' '.join(cmd)} failed (status {proc.returncode}):\n"
                 f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def walks_of(growtrace: str, trace: str) -> list[int]:
    """CPU nanoseconds of each walk that wrote Container records: one per (thread, flags, walk_ns)."""
    dump = subprocess.run([growtrace, "dump", trace], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, check=True).stdout
    seen: dict[tuple[str, str, str], int] = {}
    for match in CONTAINER.finditer(dump):
        seen.setdefault(match.groups(), int(match.group(3)))
    return list(seen.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3, help="pairs of runs (walks off, walks on)")
    args = parser.parse_args()
    growtrace = os.path.join(args.build, "bin", "growtrace")
    repro = os.path.join(REPO, "test_programs", "python", "openai_repro", "repro.py")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  (cores: {os.cpu_count()})")
    on_wall, on_cpu, off_wall, off_cpu, shares_wall, shares_cpu = [], [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="walk-cost-") as work:
        for i in range(args.repeat):
            for walks in (False, True):
                trace = os.path.join(work, f"run{i}-{'on' if walks else 'off'}.gtrace")
                env = dict(os.environ, GROWTRACE_CONTAINERS="1" if walks else "0")
                wall, cpu = run([growtrace, "run", "-o", trace, "--", args.python, repro, "--mode", "threads",
                                 "--requests", str(args.requests)], env)
                (on_wall if walks else off_wall).append(wall)
                (on_cpu if walks else off_cpu).append(cpu)
                if walks:
                    spent = walks_of(growtrace, trace)
                    total = sum(spent) / 1e9
                    shares_wall.append(total / wall)
                    shares_cpu.append(total / cpu)
                    print(f"pair {i + 1}: off {off_wall[-1]:.1f} s wall / {off_cpu[-1]:.1f} s CPU; on {wall:.1f} s / "
                          f"{cpu:.1f} s; {len(spent)} walks, {total * 1e3:.0f} ms "
                          f"({', '.join(f'{ns / 1e6:.0f}' for ns in spent)} ms): "
                          f"{100 * total / wall:.2f} % of wall, {100 * total / cpu:.2f} % of CPU")
                for name in os.listdir(work):
                    os.remove(os.path.join(work, name))
    print(f"walk share (median): {100 * statistics.median(shares_wall):.2f} % of the run's wall time, "
          f"{100 * statistics.median(shares_cpu):.2f} % of its CPU time")
    print(f"A/B (median): wall {statistics.median(off_wall):.1f} -> {statistics.median(on_wall):.1f} s "
          f"(x{statistics.median(on_wall) / statistics.median(off_wall):.3f}), CPU {statistics.median(off_cpu):.1f} -> "
          f"{statistics.median(on_cpu):.1f} s (x{statistics.median(on_cpu) / statistics.median(off_cpu):.3f})")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
