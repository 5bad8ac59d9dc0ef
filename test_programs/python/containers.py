"""Hand-written caches and registries: containers that grow, and containers that do not.

Each --case fills one container a few thousand times over a couple of seconds (paced), with
small dicts as values (so the program allocates objects the garbage collector tracks):

  request_cache  a module-level dict keyed on request ids, never emptied          grows
  registry       a dict inside an object reachable from the module (REGISTRY.by_name),
                 holding a class made per call, as a per-class registry does     grows
  bounded        a dict that evicts its oldest key past 300 entries               quiet
  cleared        a list appended to and cleared every 230 items                   quiet
  closure        a dict reachable only through a closure                         grows
  thread         a set of tuples held by an instance only a running thread holds  grows
  element_dict   a dict held by the last value of a module-level dict
                 (REGISTRIES['users'].by_id)                                     grows
  element_list   a set held by the first item of a module-level list
                 (HANDLERS[0].seen)                                              grows
  deque          a module-level deque without maxlen, appended to                grows

None of them is a functools.lru_cache. The program prints one summary line.

Under growtrace the run is cut into --walks phases and, at the end of each, waits until the
agent has walked (`AgentWalks`): the tests need at least four walks, and walks are timed, so
a loaded machine would otherwise give fewer.
"""

import argparse
import collections
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import AgentWalks, Summary  # noqa: E402

_RESPONSES: dict = {}
_RECENT: dict = {}
_BATCH: list = []
_EVENTS: collections.deque = collections.deque()
BOUND = 300
# Not a divisor of the phases' lengths (2500 by default): the walk that ends a phase finds
# the list part full (110 to 200 entries), never just cleared.
CLEAR_EVERY = 230


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


class Table:
    def __init__(self):
        self.by_id = {}

    def put(self, key, value):
        self.by_id[key] = value  # mark: element_dict_store


# One table per kind of record; the last one's keeps growing.
REGISTRIES = {"orders": Table(), "sessions": Table(), "users": Table()}


class Handler:
    def __init__(self):
        self.seen = set()

    def handle(self, key):
        self.seen.add(key)  # mark: element_list_store


# Handlers registered at start-up; the first one remembers every key it handled.
HANDLERS = [Handler(), Handler(), Handler()]


def record_event(value):
    _EVENTS.append(value)  # mark: deque_store


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

    def run(self, count, pause_every, pause, phase_end):
        for i in range(count):
            self.sessions.add((f"session-{i:08d}", i))  # mark: thread_store
            if (i + 1) % pause_every == 0:
                time.sleep(pause)
            phase_end(i)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", required=True,
                        choices=["request_cache", "registry", "bounded", "cleared", "closure", "thread",
                                 "element_dict", "element_list", "deque"])
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--pause-every", type=int, default=100)
    parser.add_argument("--pause", type=float, default=0.01)
    parser.add_argument("--walks", type=int, default=4,
                        help="phases, each ended by waiting for one of the agent's walks (0: none)")
    parser.add_argument("--print-ticks", action="store_true",
                        help="print 'tick N' at each pause (for growtrace attach: the service is up)")
    args = parser.parse_args()
    summary = Summary("containers")
    memo = make_memo()
    entries = 0
    walks = AgentWalks()

    def phase_end(i):
        walks.end_of_phase(i, args.count, args.walks)

    if args.case == "thread":
        collector = Collector()
        worker = threading.Thread(target=collector.run, args=(args.count, args.pause_every, args.pause, phase_end))
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
            elif args.case == "element_dict":
                REGISTRIES["users"].put(i, make_value(i))
                entries = len(REGISTRIES["users"].by_id)
            elif args.case == "deque":
                record_event(make_value(i))
                entries = len(_EVENTS)
            elif args.case == "element_list":
                HANDLERS[0].handle(f"key-{i:08d}")
                entries = len(HANDLERS[0].seen)
            else:
                entries = memo(f"key-{i}", make_value(i))
            if (i + 1) % args.pause_every == 0:
                if args.print_ticks:
                    print(f"tick {i // args.pause_every}", flush=True)
                time.sleep(args.pause)
            phase_end(i)
    summary["case"] = args.case
    summary["count"] = args.count
    summary["entries"] = entries
    summary.print()


if __name__ == "__main__":
    main()
