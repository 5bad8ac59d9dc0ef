"""A long-running Python service for ``growtrace attach`` (stdlib only).

Every 100 ms ("tick"), it
- stores 8 new values of about 4 KiB into the module-level dict ``_SESSIONS`` in
  ``remember_session`` (at the marked line), never removing any: an unbounded_growth finding
  with this Python frame;
- makes a new class named ``Record`` and asks the unbounded ``functools.lru_cache``
  ``describe_type`` (created at the marked line, before any attach) about it: every call
  misses and keeps about 8 KiB, a cache_growth finding keyed on many classes of one name;
- prints ``tick N sessions S types T gc_callbacks G``: T is the cache's size, G the length of
  ``gc.callbacks``, which the attached agent leaves as it was (0): its own callback is in the
  collector's list, out of the program's sight.

Attached after start-up, growtrace must report both growths, and after the detach the
program must run on exactly as before (G 0 throughout).
usage: attach_growth.py [SECONDS=60]
"""

import functools
import gc
import sys
import time

_SESSIONS: dict = {}


def remember_session(key: int) -> None:
    _SESSIONS[key] = bytearray(4096)  # mark: remember_session


@functools.lru_cache(maxsize=None)  # mark: describe_type_created
def describe_type(cls: type) -> list:
    return [cls.__name__] + [bytearray(2048) for _ in range(4)]


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    key = 0
    tick = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(8):
            remember_session(key)
            key += 1
        describe_type(type("Record", (), {"tick": tick}))
        print(f"tick {tick} sessions {len(_SESSIONS)} types {describe_type.cache_info().currsize} "
              f"gc_callbacks {len(gc.callbacks)}", flush=True)
        tick += 1
        time.sleep(0.1)


if __name__ == "__main__":
    main()
