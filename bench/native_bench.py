#!/usr/bin/env python3
"""Native overhead benchmark: no tracer vs heaptrack vs growtrace (full and sampled), side by side.

Workload: bench_malloc_heavy (two threads, PAIRS malloc/free pairs each, sizes 16 B..2 KiB,
call depths 1-9). For each tool it reports wall and CPU time and the slowdown against the
untraced run (median of --repeat runs), the trace size in bytes per event, and the time to
analyse the trace (growtrace analyze vs heaptrack_print). The runs are interleaved: each repeat
runs every tool once, so a slower spell of a shared machine does not land on one tool only.
"growtrace-sampled" is `growtrace run --sample SAMPLE` (default 512K); "growtrace-libunwind" is full
mode with GROWTRACE_UNWIND=libunwind (every native stack unwound by libunwind instead of the
tracer's own walker: what the walker saves). --compare DIR adds the
full-mode row of another build ("growtrace@DIR"), e.g. a copy of an earlier build's bin/ and lib/,
so that a change is measured before and after in one run.

    python3 bench/native_bench.py [--build build] [--pairs 2000000] [--repeat 3] [--sample 512K] [--compare DIR]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--pairs", type=int, default=2_000_000, help="malloc/free pairs per thread")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample", default="512K", help="--sample SIZE of the sampled row")
    parser.add_argument("--no-heaptrack", action="store_true")
    parser.add_argument("--compare", help="another build (its bin/growtrace) measured beside this one, full mode")
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
    gt_sampled = os.path.join(work, "sampled.gtrace")

    def clean_ht():
        for f in os.listdir(work):
            if f.startswith("bench.heaptrack"):
                os.remove(os.path.join(work, f))

    def clean(path):
        return lambda: os.path.exists(path) and os.remove(path)

    tools = [("untraced", None, lambda: [program, str(args.pairs)])]
    if shutil.which("heaptrack") and not args.no_heaptrack:
        tools.append(("heaptrack", clean_ht, lambda: ["heaptrack", "-o", ht_base, program, str(args.pairs)]))
    tools.append(("growtrace", clean(gt_trace), lambda: [growtrace, "run", "-o", gt_trace, "--", program, str(args.pairs)]))
    gt_libunwind = os.path.join(work, "libunwind.gtrace")
    tools.append(("growtrace-libunwind", clean(gt_libunwind),
                  lambda: [growtrace, "run", "-o", gt_libunwind, "--", program, str(args.pairs)],
                  {**os.environ, "GROWTRACE_UNWIND": "libunwind"}))
    tools.append(("growtrace-sampled", clean(gt_sampled),
                  lambda: [growtrace, "run", "--sample", args.sample, "-o", gt_sampled, "--", program, str(args.pairs)]))
    traces = {"growtrace": gt_trace, "growtrace-libunwind": gt_libunwind, "growtrace-sampled": gt_sampled}
    analyzers = {name: growtrace for name in traces}
    if args.compare:
        other = os.path.join(args.compare, "bin", "growtrace")
        label = f"growtrace@{os.path.basename(os.path.normpath(args.compare))}"
        other_trace = os.path.join(work, "compare.gtrace")
        traces[label], analyzers[label] = other_trace, other
        tools.append((label, clean(other_trace), lambda: [other, "run", "-o", other_trace, "--", program, str(args.pairs)]))
    tools = [tool if len(tool) == 4 else (*tool, None) for tool in tools]  # (name, cleanup, command, env)
    times = {name: [] for name, _, _, _ in tools}
    for _ in range(args.repeat):
        for name, cleanup, make_cmd, env in tools:
            if cleanup:
                cleanup()
            times[name].append(timed(make_cmd(), env))
            print(f"  {name}: wall {times[name][-1][0]:.3f} s", file=sys.stderr, flush=True)

    def analyse(cmd):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0

    rows = []
    for name, _, _, _ in tools:
        wall = statistics.median(t[0] for t in times[name])
        cpu = statistics.median(t[1] for t in times[name])
        size = analyze = None
        if name == "heaptrack":
            ht_file = next(os.path.join(work, f) for f in os.listdir(work) if f.startswith("bench.heaptrack"))
            size = os.path.getsize(ht_file)
            analyze = analyse(["heaptrack_print", ht_file])
        elif name in traces:
            path = traces[name]
            size = os.path.getsize(path)
            analyze = analyse([analyzers[name], "analyze", path, "--json", "-o", os.path.join(work, "report.json")])
        rows.append((name, wall, cpu, size, analyze))
    base_wall, base_cpu = rows[0][1], rows[0][2]

    print(f"workload: bench_malloc_heavy, 2 threads x {args.pairs} malloc/free pairs ({events} events), "
          f"median of {args.repeat} runs, {os.cpu_count()} cores")
    print(f"{'tool':<24} {'wall s':>8} {'cpu s':>8} {'slowdown':>9} {'cpu ratio':>9} {'trace B':>12} "
          f"{'B/event':>8} {'analyze s':>10}")
    for name, wall, cpu, size, analyze in rows:
        size_text = f"{size:>12}" if size is not None else f"{'-':>12}"
        per_event = f"{size / events:>8.2f}" if size is not None else f"{'-':>8}"
        analyze_text = f"{analyze:>10.2f}" if analyze is not None else f"{'-':>10}"
        print(f"{name:<24} {wall:>8.3f} {cpu:>8.3f} {wall / base_wall:>8.1f}x {cpu / base_cpu:>8.1f}x "
              f"{size_text} {per_event} {analyze_text}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
