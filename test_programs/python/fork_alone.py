"""Forks three children with os.fork(), from a program of one thread or with THREADS threads
of its own (each sleeping until the end). Each child keeps 50 blocks and leaves with
os._exit(0); after each fork the parent keeps 40 blocks of 5000 bytes (keep_after_fork).

CPython 3.12 and later warn at each fork of a process with more than one thread; run with
``-W always`` the warnings show on stderr, with ``-W error::DeprecationWarning`` they are
turned into errors CPython swallows. Either way the output is the same traced and untraced.
With GO_FILE (for a test that attaches first), it waits until GO_FILE exists before its
forks, and until it is gone again before it ends (at most 30 s each).
usage: fork_alone.py [THREADS=0] [GO_FILE]
"""

import os
import sys
import threading
import time

go_file = sys.argv[2] if len(sys.argv) > 2 else None


def wait_until(condition):
    deadline = time.monotonic() + 30
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


done = threading.Event()
helpers = [threading.Thread(target=done.wait) for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 0)]
for t in helpers:
    t.start()


def keep_after_fork(kept, n):
    for i in range(40):
        kept[40 * n + i] = bytes(5000)  # mark: keep_after_fork


kept = [None] * 120  # no list growth at the marked line
if go_file:
    print("fork_alone: waiting", flush=True)
    wait_until(lambda: os.path.exists(go_file))
for n in range(3):
    pid = os.fork()
    if pid == 0:
        child_blocks = [bytearray(2000) for _ in range(50)]
        os._exit(0)
    keep_after_fork(kept, n)
    _, status = os.waitpid(pid, 0)
    print(f"fork_alone: child {n} ended with {status}", flush=True)
if go_file:
    wait_until(lambda: not os.path.exists(go_file))
done.set()
for t in helpers:
    t.join()
print(f"fork_alone: {len(kept)} blocks kept, {threading.active_count()} thread(s)", flush=True)
