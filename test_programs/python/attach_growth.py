"""A long-running Python service for ``growtrace attach`` (stdlib only).

Prints ``tick N`` every 100 ms and, each tick, stores 8 new values of about 4 KiB into the
module-level dict ``_SESSIONS`` in ``remember_session`` (at the marked line), never removing
any: attached after start-up, growtrace must flag the growth with this Python frame.
usage: attach_growth.py [SECONDS=60]
"""

import sys
import time

_SESSIONS: dict = {}


def remember_session(key: int) -> None:
    _SESSIONS[key] = bytearray(4096)  # mark: remember_session


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    key = 0
    tick = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(8):
            remember_session(key)
            key += 1
        print(f"tick {tick} sessions {len(_SESSIONS)}", flush=True)
        tick += 1
        time.sleep(0.1)


if __name__ == "__main__":
    main()
