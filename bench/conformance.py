#!/usr/bin/env python3
"""Conformance: CPython's own regression tests, run untraced and under `growtrace run`.

The tracer promises that a program behaves the same with it as without it. CPython's test
suite is a program nobody here wrote that checks threads, fork, exec, signals, descriptors and
exit codes in every corner, so: run a set of its test modules plainly, then again with
`growtrace run` (children and exec'd images traced too, the defaults), and compare the outcome
of every test case. Any case that passes untraced and not traced (or the reverse) is listed.

    python3 bench/conformance.py                 # the full set below
    python3 bench/conformance.py --short         # the quick set ctest runs (label conformance)
    python3 bench/conformance.py --python /usr/bin/python3.11 test_os test_signal
    python3 bench/conformance.py --regrtest-option=--ignore='*gh_102056*' test_threading

Needs a CPython whose Lib/test is installed (pyenv's builds have it; Debian's python3.11 needs
the libpython3.11-testsuite package). Exit status 0 when every case has the same outcome both
ways, 1 otherwise, 2 when it could not run. Traces go to a scratch directory, removed unless
--keep.
"""
from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PYTHON = os.path.expanduser("~/.pyenv/versions/3.11.7/bin/python3.11")

# Threads, fork (also from a thread), exec, signals, descriptors, exit: what the tracer could
# break. Each entry is one regrtest invocation (module names, then options such as -m PATTERN).
FULL = [
    ["test_threading"], ["test_subprocess"], ["test_os"], ["test_signal"], ["test_posix"],
    ["test_fork1"], ["test_wait4"], ["test_select"], ["test_mmap"], ["test_gc"], ["test_atexit"],
    ["test_faulthandler"], ["test_sys"], ["test_tempfile"], ["test_thread"], ["test_pty"],
    ["test_fcntl"], ["test_io"],
    # What exercises the tracer hardest: event loops and executors handing objects
    # between threads, forkserver workers, C calls through ctypes, weak references finalised by
    # the collector, and tracemalloc's own allocation hooks beside the tracer's.
    ["test_asyncio"], ["test_concurrent_futures"], ["test_multiprocessing_forkserver"], ["test_ctypes"],
    ["test_weakref"], ["test_tracemalloc"],
]
# About a minute both ways: the cases that have failed under the tracer, and quick modules around them.
SHORT = [
    ["test_os", "test_fork1", "test_wait4", "test_atexit", "test_fcntl", "test_pty"],
    ["test_subprocess", "-m", "*pass_fds*", "-m", "*close_fds*", "-m", "*_fd_*"],
    ["test_threading", "-m", "*fork*", "-m", "*exit*"],
]


def outcomes(junit: str) -> dict[str, str]:
    """test id -> passed / failed / error / skipped, from regrtest's --junit-xml file."""
    result = {}
    for case in ET.parse(junit).iter("testcase"):
        name = f"{case.get('classname', '')}.{case.get('name', '')}"
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
        result[name] = status
    return result


def run_group(python: str, group: list[str], workdir: str, traced_with: str | None, traces: str,
              run_options: list[str], regrtest_options: list[str]) -> tuple[dict, float, str]:
    junit = os.path.join(workdir, f"{'traced' if traced_with else 'plain'}-{abs(hash(tuple(group)))}.xml")
    command = [python, "-m", "test", *group, *regrtest_options, "--junit-xml", junit]
    if traced_with:
        trace = os.path.join(traces, f"{group[0]}.gtrace")
        command = [traced_with, "run", *run_options, "-o", trace, "--"] + command
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    seconds = time.perf_counter() - start
    if not os.path.exists(junit):
        return {}, seconds, proc.stdout[-4000:]
    return outcomes(junit), seconds, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="test modules (default: the full set)")
    parser.add_argument("--python", default=DEFAULT_PYTHON)
    parser.add_argument("--growtrace", default=os.path.join(REPO, "build", "bin", "growtrace"))
    parser.add_argument("--short", action="store_true", help="the quick set")
    parser.add_argument("--run-option", action="append", default=[], metavar="OPTION",
                        help="passed to growtrace run, e.g. --run-option=--no-python-objects")
    parser.add_argument("--regrtest-option", action="append", default=[], metavar="OPTION",
                        help="passed to every regrtest run both ways, e.g. --regrtest-option=--ignore=PATTERN for "
                             "a case that cannot finish on that build")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (traces, logs)")
    parser.add_argument("--missing-is-skip", action="store_true",
                        help="exit 77 (ctest's skip) instead of 2 when the python or its tests are missing")
    args = parser.parse_args()
    cannot_run = 77 if args.missing_is_skip else 2

    groups = [[m] for m in args.modules] if args.modules else (SHORT if args.short else FULL)
    if not os.access(args.python, os.X_OK):
        print(f"conformance: no python at {args.python} (--python PATH)", file=sys.stderr)
        return cannot_run
    # Debian's python3.11 ships test.support and test.libregrtest without the test modules, and
    # some builds leave modules out (pyenv's 3.10-3.12 here have no test_concurrent_futures nor
    # test_multiprocessing_forkserver): each module is looked for, and the missing ones are said
    # and left out. Without test.support, or with none of the modules, nothing can run.
    modules = sorted({m for g in groups for m in g if m.startswith("test_")})
    probe = ("import importlib.util, sys, test.libregrtest, test.support\n"
             "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec('test.' + m) is None))")
    found = subprocess.run([args.python, "-c", probe, *modules], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    missing = set(found.stdout.split()) if found.returncode == 0 else set(modules)
    groups = [[m for m in g if m not in missing] for g in groups]
    groups = [g for g in groups if any(m.startswith("test_") for m in g)]
    if not groups:
        print(f"conformance: {args.python} lacks Lib/test or all of {modules} (Debian: apt-get install "
              "libpython3.11-testsuite)",
              file=sys.stderr)
        return cannot_run
    if missing:
        print(f"conformance: not installed with {args.python}, left out: {' '.join(sorted(missing))}", flush=True)
    if not os.access(args.growtrace, os.X_OK):
        print(f"conformance: no growtrace at {args.growtrace} (--growtrace PATH)", file=sys.stderr)
        return 2

    workdir = tempfile.mkdtemp(prefix="growtrace-conformance-")
    traces = os.path.join(workdir, "traces")
    os.makedirs(traces)
    plain_all, traced_all = {}, {}
    plain_s = traced_s = 0.0
    problems = []
    for group in groups:
        plain, s1, log1 = run_group(args.python, group, workdir, None, traces, [], args.regrtest_option)
        traced, s2, log2 = run_group(args.python, group, workdir, args.growtrace, traces, args.run_option,
                                     args.regrtest_option)
        plain_s += s1
        traced_s += s2
        label = " ".join(group)
        if not plain or not traced:
            problems.append(f"{label}: no results {'untraced' if not plain else 'traced'}:\n"
                            f"{(log1 if not plain else log2)[-2000:]}")
        print(f"{label}: {len(plain)} cases, untraced {s1:.0f} s, traced {s2:.0f} s", flush=True)
        plain_all.update(plain)
        traced_all.update(traced)

    counts = lambda r: collections.Counter(r.values())
    cp, ct = counts(plain_all), counts(traced_all)
    print()
    print(f"python: {args.python}; growtrace run {' '.join(args.run_option)}; regrtest "
          f"{' '.join(args.regrtest_option)}")
    print(f"{'':10} {'passed':>7} {'failed':>7} {'error':>7} {'skipped':>7} {'total':>7} {'seconds':>8}")
    for name, c, s in (("untraced", cp, plain_s), ("traced", ct, traced_s)):
        print(f"{name:10} {c['passed']:7} {c['failed']:7} {c['error']:7} {c['skipped']:7} {sum(c.values()):7} "
              f"{s:8.0f}")
    differ = sorted(k for k in set(plain_all) | set(traced_all) if plain_all.get(k) != traced_all.get(k))
    for k in differ:
        print(f"  differs: {k}: untraced {plain_all.get(k, 'absent')}, traced {traced_all.get(k, 'absent')}")
    for k in sorted(k for k in plain_all if plain_all[k] in ("failed", "error") and traced_all.get(k) == plain_all[k]):
        print(f"  {plain_all[k]} both ways: {k}")
    for p in problems:
        print(p)
    n_traces = len(os.listdir(traces))
    print(f"{n_traces} traces written under {traces}")
    if args.keep:
        print(f"kept {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if not differ and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
