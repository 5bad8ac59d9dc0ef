"""Where a full-mode event's cost goes: one traced run of a workload under `perf record`, its
samples put into the tracer's parts (the hooks, the stack walk, the stack tree, the records with
their clock and lock, the Python frames, the writer's merge, compaction and compression, the
kernel) and the program's own work, each as a share of all samples and in nanoseconds of CPU per
recorded event (the trace's Ledger record counts the events).

    python3 bench/profile_parts.py [--build build] [--workload native|openai] [--frequency 4000]

perf must be installed and allowed (perf_event_paranoid <= 1, or root). The parts are told by
symbol name; a symbol no rule knows is counted under "other" and listed with --unknown.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (part, test of (comm, dso, symbol)): first match wins. Writer threads are named growtrace-*.
TRACER_THREAD = re.compile(r"^growtrace-")
PARTS = [
    ("writer: compression", lambda c, d, s: TRACER_THREAD.match(c) and "libzstd" in d),
    ("writer: merge by time", lambda c, d, s: TRACER_THREAD.match(c) and "EventMerger" in s),
    ("writer: compaction, blocks", lambda c, d, s: TRACER_THREAD.match(c) and "libgrowtrace" in d),
    ("writer: kernel, file", lambda c, d, s: TRACER_THREAD.match(c)),
    ("hooks: stack walk", lambda c, d, s: re.search(r"cfi_backtrace|capture_stack|walk_memo|unw_|_Ux86_64|_ULx86_64", s)
        or "libunwind" in d),
    ("hooks: stack tree", lambda c, d, s: re.search(r"intern_node|intern_stack|CapturedStack::intern|StackTree", s)),
    ("hooks: Python frames", lambda c, d, s: "libgrowtrace" in d and re.search(
        r"FrameWalker|python::|intern_python_stack|tag_python_frames|python_frame|merge_python|hooked_", s)),
    ("hooks: records, clock, lock", lambda c, d, s: re.search(r"put_alloc|put_free|record_|make_room|lock_my_state", s)),
    ("hooks: entry, sampler, rest", lambda c, d, s: "libgrowtrace" in d),
    ("kernel (program threads)", lambda c, d, s: "kernel" in d),
    ("the program's own work", lambda c, d, s: True),
]


def growtrace(build):
    return os.path.join(build, "bin", "growtrace")


def workload(name, build):
    if name == "native":
        return [os.path.join(build, "bin", "bench_malloc_heavy"), "2000000"]
    python = os.path.join(ROOT, ".venv", "bin", "python")
    return [python, os.path.join(ROOT, "test_programs", "python", "openai_repro", "repro.py"),
            "--mode", "threads", "--requests", "20", "--interval", "0"]


def ledger_events(build, trace):
    dump = subprocess.run([growtrace(build), "dump", trace], capture_output=True, text=True, check=True).stdout
    match = re.search(r"Ledger allocations_recorded=(\d+) frees_recorded=(\d+)", dump)
    if not match:
        sys.exit("profile_parts: the trace has no Ledger record")
    return int(match.group(1)) + int(match.group(2))


def samples_by_symbol(data):
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "comm,dso,symbol", "-g", "none",
                             "-F", "sample,comm,dso,symbol", "--field-separator", "\t"],
                            capture_output=True, text=True, check=True).stdout
    rows = []
    for line in report.splitlines():
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) >= 4 and fields[0].isdigit():
            rows.append((int(fields[0]), fields[1], fields[2], fields[3]))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--workload", choices=["native", "openai"], default="native")
    parser.add_argument("--frequency", type=int, default=4000, help="perf samples per second of CPU")
    parser.add_argument("--unknown", action="store_true", help="list the symbols counted as other")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="growtrace-profile-") as work:
        trace, data = os.path.join(work, "run.gtrace"), os.path.join(work, "perf.data")
        command = [growtrace(args.build), "run", "-o", trace, "--", *workload(args.workload, args.build)]
        subprocess.run(["perf", "record", "-q", "-F", str(args.frequency), "-o", data, "--", *command],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        events = ledger_events(args.build, trace)
        rows = samples_by_symbol(data)

    totals = {name: 0 for name, _ in PARTS}
    for count, comm, dso, symbol in rows:
        part = next(name for name, test in PARTS if test(comm, dso, symbol))
        totals[part] += count
    all_samples = sum(totals.values()) or 1
    ns_per_sample = 1e9 / args.frequency
    print(f"{args.workload}: {events:,} events recorded, {all_samples:,} samples at {args.frequency} Hz "
          f"({all_samples * ns_per_sample / 1e9:.2f} s of CPU)")
    print(f"{'part':<30} {'share':>7} {'ns/event':>9}")
    for name, _ in PARTS:
        share = totals[name] / all_samples
        print(f"{name:<30} {100 * share:6.1f}% {totals[name] * ns_per_sample / events:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
