"""An unbounded lru_cache that grows for the whole run and is torn down at the end.

The cache lives in a module of its own (``teardown_cache_mod``, made at run time and entered in
``sys.modules``), filled with one new key per request, each value about 2 KB. How the end goes:

- ``--teardown modules``: nothing; the interpreter clears the module at shutdown.
- ``--teardown atexit``: an atexit handler (it runs before the tracer's own) deletes the module
  from ``sys.modules``, empties the cache and the module's globals.
- ``--teardown clear``: ``cache_clear()`` at the end of the script, before it returns.

In every case the cache grew for as long as the program worked.

    python teardown_cache.py [--requests N] [--seconds S] [--teardown modules|atexit|clear]
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402

MODULE_SOURCE = '''
import functools

@functools.lru_cache(maxsize=None)
def render(key):
    return [("%d-%d" % (key, n)) * 4 for n in range(24)]
'''


def make_module() -> types.ModuleType:
    module = types.ModuleType("teardown_cache_mod")
    module.__file__ = "<teardown_cache_mod>"
    sys.modules[module.__name__] = module
    exec(compile(MODULE_SOURCE, module.__file__, "exec"), module.__dict__)
    return module


def tear_down() -> None:
    module = sys.modules.pop("teardown_cache_mod", None)
    if module is not None:
        module.render.cache_clear()
        module.__dict__.clear()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2500)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--teardown", choices=("modules", "atexit", "clear"), default="modules")
    args = parser.parse_args()
    summary = Summary("teardown_cache")
    module = make_module()
    if args.teardown == "atexit":
        atexit.register(tear_down)
    start = time.monotonic()
    total = 0
    for i in range(args.requests):
        total += len(module.render(i))  # mark: cache_call
        left = start + args.seconds * (i + 1) / args.requests - time.monotonic()
        if left > 0:
            time.sleep(left)
    summary["entries"] = module.render.cache_info().currsize
    summary["total"] = total
    if args.teardown == "clear":
        module.render.cache_clear()
    summary.print()


if __name__ == "__main__":
    main()
