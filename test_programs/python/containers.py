"""Hand-written caches and registries: containers that grow, and containers that do not.

Each --case fills one container a few thousand times over a couple of seconds (paced), with
small dicts as values (so the program allocates objects the garbage collector tracks):

  request_cache  a module-level dict keyed on request ids, never emptied          grows
  registry       a dict inside an object reachable from the module (REGISTRY.by_name),
                 holding a class made per call, as a per-class registry does     grows
  bounded        a dict that evicts its oldest key past 300 entries               quiet
  cleared        a list appended to and cleared every 250 items                   quiet
  closure        a dict reachable only through a closure                         grows
  thread         a set of tuples held by an instance only a running thread holds  grows

None of them is a functools.lru_cache. The program prints one summary line.
"""

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402

_RESPONSES: dict = {}
_RECENT: dict = {}
_BATCH: list = []
BOUND = 300
CLEAR_EVERY = 250


def make_value(i):
    return {"id": i, "status": 200, "body": f"response-{i}-" + "x" * 64}  # mark: make_value


def store_response(request_id, value):
    _RESPONSES[request_id] = value  # mark: response_store


class Registry:
    def __init__(self):
        self.by_name = {}

    def register(self, cls):
        self.by_name[f"{cls.__qualname__}-{id(cls)}"] = cls  # mark: registry_store


REGISTRY = Registry()


def remember_recent(key, value):
    _RECENT[key] = value
    if len(_RECENT) > BOUND:
        del _RECENT[next(iter(_RECENT))]  # the oldest key: a bounded dict


def collect(item):
    _BATCH.append(item)
    if len(_BATCH) >= CLEAR_EVERY:
        _BATCH.clear()


def make_memo():
    seen = {}

    def memo(key, value):
        seen[key] = value  # mark: closure_store
        return len(seen)

    return memo


class Collector:
    def __init__(self):
        self.sessions = set()

    def run(self, count, pause_every, pause):
        for i in range(count):
            self.sessions.add((f"session-{i:08d}", i))  # mark: thread_store
            if (i + 1) % pause_every == 0:
                time.sleep(pause)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", required=True,
                        choices=["request_cache", "registry", "bounded", "cleared", "closure", "thread"])
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--pause-every", type=int, default=100)
    parser.add_argument("--pause", type=float, default=0.04)
    parser.add_argument("--print-ticks", action="store_true",
                        help="print 'tick N' at each pause (for growtrace attach: the service is up)")
    args = parser.parse_args()
    summary = Summary("containers")
    memo = make_memo()
    entries = 0
    if args.case == "thread":
        collector = Collector()
        worker = threading.Thread(target=collector.run, args=(args.count, args.pause_every, args.pause))
        worker.start()
        del collector
        worker.join()
    else:
        for i in range(args.count):
            if args.case == "request_cache":
                store_response(f"req-{i:08d}", make_value(i))
                entries = len(_RESPONSES)
            elif args.case == "registry":
                REGISTRY.register(type("Handler", (), {"index": i}))
                entries = len(REGISTRY.by_name)
            elif args.case == "bounded":
                remember_recent(f"key-{i}", make_value(i))
                entries = len(_RECENT)
            elif args.case == "cleared":
                collect(make_value(i))
                entries = len(_BATCH)
            else:
                entries = memo(f"key-{i}", make_value(i))
            if (i + 1) % args.pause_every == 0:
                if args.print_ticks:
                    print(f"tick {i // args.pause_every}", flush=True)
                time.sleep(args.pause)
    summary["case"] = args.case
    summary["count"] = args.count
    summary["entries"] = entries
    summary.print()


if __name__ == "__main__":
    main()
