"""A multiprocessing.Pool whose workers grow: each task runs the standard-library copy of the
openai #2672 pattern (../lru_growth.py: an unbounded lru_cache keyed on classes built afresh in
each new thread) on a new thread, so ``lru_growth.adapter_for`` grows in every worker.

    python mp_pool.py --start-method fork|spawn [--workers 2] [--tasks 160] [--interval 0.01]

With fork the workers inherit the parent's cache (made at import, before the pool); with spawn
each worker is a new interpreter that imports it again. The parent itself never calls it.
Prints ``mp_pool start_method=... tasks=... workers=PID,PID``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import lru_growth  # noqa: E402


def task(interval: float) -> int:
    results: list = []
    t = threading.Thread(target=lru_growth.handle_request, args=(results,))  # mark: pool_task_thread
    t.start()
    t.join()
    time.sleep(interval)
    return os.getpid()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start-method", choices=("fork", "spawn"), required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=160)
    parser.add_argument("--interval", type=float, default=0.01)
    args = parser.parse_args()
    context = multiprocessing.get_context(args.start_method)
    with context.Pool(args.workers) as pool:
        pids = pool.map(task, [args.interval] * args.tasks, chunksize=1)
        pool.close()
        pool.join()
    workers = sorted(set(pids))
    print(f"mp_pool start_method={args.start_method} tasks={args.tasks} "
          f"workers={','.join(str(p) for p in workers)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
