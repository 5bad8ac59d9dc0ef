"""Objects made in one thread and dropped in another, the shapes of real Python services: all
bounded, so a tracer that keeps every free reports nothing.

  executor  a ThreadPoolExecutor computes results that the main thread reads and drops
  queue     a producer thread hands objects through queue.Queue(maxsize=64) to a consumer
  lru       four threads call a functools.lru_cache(maxsize=64) with ever-new keys
  asyncio   an event loop runs blocking work with run_in_executor and drops the results

    python handoff.py MODE [--items N] [--seconds S]
--seconds S: run for S seconds instead of --items (for attach), printing "running" first.
"""
import argparse
import asyncio
import concurrent.futures
import functools
import queue
import sys
import threading
import time


def payload(n):
    # A few objects of several sizes: a dict, a list, strings, a bytes block.
    return {"n": n, "name": f"item-{n}", "values": list(range(n % 50)), "blob": bytes(200 + n % 3000)}


def run_executor(more):
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        n = 0
        while more(n):
            futures = [pool.submit(payload, n + i) for i in range(32)]
            for f in futures:
                f.result()["n"]
            n += 32


def run_queue(more):
    q = queue.Queue(maxsize=64)
    done = object()

    def consume():
        while True:
            item = q.get()
            if item is done:
                return
            item["name"].upper()

    consumer = threading.Thread(target=consume)
    consumer.start()
    n = 0
    while more(n):
        q.put(payload(n))
        n += 1
    q.put(done)
    consumer.join()


@functools.lru_cache(maxsize=64)  # mark: bounded_cache
def shaped(key):
    return payload(key)


def run_lru(more):
    counter = iter(range(10**12))
    lock = threading.Lock()

    def work():
        while True:
            with lock:
                n = next(counter)
            if not more(n):
                return
            shaped(n)["n"]

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_asyncio(more):
    async def main():
        loop = asyncio.get_running_loop()
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            n = 0
            while more(n):
                results = await asyncio.gather(*(loop.run_in_executor(pool, payload, n + i) for i in range(16)))
                del results
                n += 16

    asyncio.run(main())


MODES = {"executor": run_executor, "queue": run_queue, "lru": run_lru, "asyncio": run_asyncio}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=0)
    args = parser.parse_args()
    if args.seconds:
        deadline = time.monotonic() + args.seconds
        print("running", flush=True)
        more = lambda n: time.monotonic() < deadline
    else:
        more = lambda n: n < args.items
    MODES[args.mode](more)
    print(f"done {args.mode}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
