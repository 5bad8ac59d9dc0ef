"""A one-minute check that full and sampled tracing have not become slower than recorded.

Runs two short workloads untraced and traced, interleaved (each repeat runs every row once, so a
slow spell of the machine does not land on one row only), and compares each traced/untraced
ratio with its budget in bench/quick_check_budget.json: the figure last measured on an idle
2-core machine, plus a tolerance for the noise of short runs. Prints one line per row and exits
1 if a ratio is over budget, 0 otherwise. A check for a developer before and after a change to
the hot path, not a timed test: the figures depend on the machine and its load.

    python3 bench/quick_check.py [--build build] [--repeat 5]

After a change that makes tracing faster, record the new figures with --record (the budget file
is rewritten with the medians of this run).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_bench import timed  # noqa: E402  (wall and CPU seconds of one command)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGET = os.path.join(ROOT, "bench", "quick_check_budget.json")


def rows(build: str, work: str) -> list[tuple[str, list[str], list[str]]]:
    """(name, untraced command, traced command) of each row."""
    growtrace = os.path.join(build, "bin", "growtrace")
    native = [os.path.join(build, "bin", "bench_malloc_heavy"), "1000000"]
    python = os.path.join(ROOT, ".venv", "bin", "python")
    repro = [python, os.path.join(ROOT, "test_programs", "python", "openai_repro", "repro.py"),
             "--mode", "threads", "--requests", "10", "--interval", "0"]
    out = os.path.join(work, "check.gtrace")
    return [
        ("native full", native, [growtrace, "run", "-o", out, "--", *native]),
        ("native sampled", native, [growtrace, "run", "--sample", "512K", "-o", out, "--", *native]),
        ("openai full", repro, [growtrace, "run", "-o", out, "--", *repro]),
    ]


def measure(build: str, repeat: int) -> dict[str, float]:
    """Median wall-time ratio traced/untraced of each row."""
    with tempfile.TemporaryDirectory(prefix="growtrace-quick-check-") as work:
        table = rows(build, work)
        for _, untraced, traced in table:
            for path in (untraced[0], traced[0]):
                if not os.path.exists(path):
                    sys.exit(f"quick_check: {path} is missing; build first (tools/setup.sh)")
        ratios = {name: [] for name, _, _ in table}
        for _ in range(repeat):
            for name, untraced, traced in table:
                base = timed(untraced)[0]
                ratios[name].append(timed(traced)[0] / base)
        return {name: statistics.median(values) for name, values in ratios.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--record", action="store_true", help="write this run's figures as the new budget")
    args = parser.parse_args()

    measured = measure(args.build, args.repeat)
    with open(BUDGET) as f:
        budget = json.load(f)
    tolerance = budget["tolerance"]
    over = []
    for name, ratio in measured.items():
        recorded = budget["ratios"].get(name)
        limit = recorded * (1 + tolerance) if recorded else None
        verdict = "no budget" if limit is None else ("over budget" if ratio > limit else "ok")
        if verdict == "over budget":
            over.append(name)
        limit_text = f"{limit:.2f}x" if limit else "-"
        print(f"{name:<16} {ratio:6.2f}x untraced   budget {limit_text:>7}   {verdict}")
    if args.record:
        budget["ratios"] = {name: round(ratio, 2) for name, ratio in measured.items()}
        with open(BUDGET, "w") as f:
            json.dump(budget, f, indent=2)
            f.write("\n")
        print(f"recorded in {BUDGET}")
    return 1 if over and not args.record else 0


if __name__ == "__main__":
    sys.exit(main())
