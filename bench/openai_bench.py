#!/usr/bin/env python3
"""Python overhead benchmark on the openai #2672 reproduction: untraced vs heaptrack vs memray vs growtrace.

Workload: test_programs/python/openai_repro/repro.py --mode threads --requests N --interval 0, run with the
venv's python (.venv/bin/python for 3.11, .venv-3.X/bin/python for --python 3.X) against its in-process
mock server; each request runs in a new thread.
Each tool runs it in turn:

    untraced   python repro.py ...
    heaptrack  heaptrack -o FILE python repro.py ...
    memray     python -m memray run --native -f -o FILE repro.py ...
    memray+pyalloc  the same with --trace-python-allocators (sees pymalloc's objects, as growtrace does)
    growtrace  growtrace run -o FILE -- python repro.py ...
    growtrace-fast  the same with --no-python-objects (pymalloc not hooked, as memray's default)
    growtrace-sampled  growtrace run --sample SAMPLE (default 512K) -o FILE -- python repro.py ...

For each it reports (median of --repeat runs) the wall time and CPU time (user+sys of the children, so
heaptrack's and memray's own processes count too), the slowdown against the untraced run as ratios, the
size of the output file(s), and the repro's own `seconds=` figure from its summary line: the request phase
alone, without interpreter start-up, imports or the tracer's work at exit.

    python3 bench/openai_bench.py [--build /tmp/rootbuild] [--requests 20] [--repeat 1] [--python 3.12]
                                  [--sample 512K] [--tools untraced,memray,growtrace,growtrace-sampled]
                                  [--compare DIR]
--compare DIR adds the full-mode row of another build ("growtrace@DIR": its bin/growtrace), so that a
change is measured before and after in one run.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user+sys of the children) and the repro's seconds= of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    match = re.search(r"^repro .*\berrors=(\d+)\b.*\bseconds=([0-9.]+)", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or not match or match.group(1) != "0":
        sys.exit(f"openai_bench: {' '.join(cmd)} failed (status {proc.returncode}):\n"
                 f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return wall, cpu, float(match.group(2))


def output_size(work: str, prefix: str) -> int:
    """Total bytes of the files a tool wrote (heaptrack adds .zst/.gz, growtrace one file per process)."""
    return sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work) if f.startswith(prefix))


def remove_outputs(work: str, prefix: str) -> None:
    for f in os.listdir(work):
        if f.startswith(prefix):
            os.remove(os.path.join(work, f))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--requests", type=int, default=20, help="requests, one new thread each")
    parser.add_argument("--repeat", type=int, default=1, help="runs per tool (median); each takes 10-40 s")
    parser.add_argument("--python", default="3.11", help="CPython version: the project's venv for it")
    parser.add_argument("--sample", default="512K", help="--sample SIZE of the sampled row")
    parser.add_argument("--tools", help="comma-separated subset of the rows (untraced is always run)")
    parser.add_argument("--compare", help="another build (its bin/growtrace) measured beside this one, full mode")
    args = parser.parse_args()

    venv = ".venv" if args.python == "3.11" else f".venv-{args.python}"
    python = os.path.join(root, venv, "bin", "python")
    repro = os.path.join(root, "test_programs", "python", "openai_repro", "repro.py")
    growtrace = os.path.join(args.build, "bin", "growtrace")
    for path in (python, repro, growtrace):
        if not os.path.exists(path):
            sys.exit(f"openai_bench: {path} is missing")
    repro_args = [repro, "--mode", "threads", "--requests", str(args.requests), "--interval", "0"]
    work = tempfile.mkdtemp(prefix="growtrace-openai-bench-")

    tools = [("untraced", None, lambda out: [python, *repro_args])]
    if shutil.which("heaptrack"):
        tools.append(("heaptrack", "out.heaptrack", lambda out: ["heaptrack", "-o", out, python, *repro_args]))
    if subprocess.run([python, "-c", "import memray"], capture_output=True).returncode == 0:
        tools.append(("memray", "out.memray",
                      lambda out: [python, "-m", "memray", "run", "--native", "-f", "-o", out, *repro_args]))
        # memray sees pymalloc's objects only with this option; growtrace always does (PEP 445
        # hooks), so this row is the like-for-like comparison.
        tools.append(("memray+pyalloc", "pyalloc.memray",
                      lambda out: [python, "-m", "memray", "run", "--native", "--trace-python-allocators",
                                   "-f", "-o", out, *repro_args]))
    tools.append(("growtrace", "out.gtrace", lambda out: [growtrace, "run", "-o", out, "--", python, *repro_args]))
    # Without the PEP 445 hooks: small objects seen only as pymalloc's arenas, like memray's default.
    tools.append(("growtrace-fast", "fast.gtrace",
                  lambda out: [growtrace, "run", "--no-python-objects", "-o", out, "--", python, *repro_args]))
    tools.append(("growtrace-sampled", "sampled.gtrace",
                  lambda out: [growtrace, "run", "--sample", args.sample, "-o", out, "--", python, *repro_args]))
    if args.compare:
        other = os.path.join(args.compare, "bin", "growtrace")
        tools.append((f"growtrace@{os.path.basename(os.path.normpath(args.compare))}", "compare.gtrace",
                      lambda out: [other, "run", "-o", out, "--", python, *repro_args]))
    if args.tools:
        wanted = set(args.tools.split(",")) | {"untraced"} | ({tools[-1][0]} if args.compare else set())
        tools = [t for t in tools if t[0] in wanted]

    # Runs are interleaved (each repeat runs every tool once) so that a slower spell of a shared
    # machine does not land on one tool only.
    runs = {name: [] for name, _, _ in tools}
    sizes = {name: None for name, _, _ in tools}
    for _ in range(args.repeat):
        for name, prefix, make_cmd in tools:
            if prefix:
                remove_outputs(work, prefix)
            runs[name].append(timed(make_cmd(os.path.join(work, prefix or "unused"))))
            sizes[name] = output_size(work, prefix) if prefix else None
            print(f"  {name}: wall {runs[name][-1][0]:.2f} s", file=sys.stderr, flush=True)
    rows = []
    for name, _, _ in tools:
        wall, cpu, seconds = (statistics.median(r[i] for r in runs[name]) for i in range(3))
        rows.append((name, wall, cpu, seconds, sizes[name]))
    shutil.rmtree(work, ignore_errors=True)

    base_wall, base_cpu, base_seconds = rows[0][1:4]
    print(f"workload: openai #2672 repro on CPython {args.python}, --mode threads --requests {args.requests} --interval 0, "
          f"median of {args.repeat} run(s), machine: {os.cpu_count()} cores")
    print(f"{'tool':<24} {'wall s':>8} {'cpu s':>8} {'wall x':>7} {'cpu x':>7} {'repro s':>8} {'repro x':>8} "
          f"{'output MB':>10}")
    for name, wall, cpu, seconds, size in rows:
        size_text = f"{size / 1e6:>10.2f}" if size is not None else f"{'-':>10}"
        print(f"{name:<24} {wall:>8.2f} {cpu:>8.2f} {wall / base_wall:>6.1f}x {cpu / base_cpu:>6.1f}x "
              f"{seconds:>8.2f} {seconds / max(base_seconds, 0.01):>7.1f}x {size_text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
