"""Helpers shared by the stdlib-only test programs (no third-party imports, any CPython 3.11).

Lines that end-to-end tests refer to carry a ``# mark: NAME`` comment; ``mark_line(path,
NAME)`` finds them, so the tests never hard-code line numbers.
"""

from __future__ import annotations

import os
import sys
import time


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def mark_line(path: str, name: str) -> int:
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# mark: {name}"):
                return number
    raise LookupError(f"no '# mark: {name}' in {path}")


class Summary:
    """Collects figures and prints them as one ``NAME key=value ...`` line at the end."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.t0 = time.monotonic()
        self.rss_start = rss_kib()
        self.fields: dict[str, object] = {}

    def __setitem__(self, key: str, value: object) -> None:
        self.fields[key] = value

    def print(self) -> None:
        self.fields["rss_start_kib"] = self.rss_start
        self.fields["rss_end_kib"] = rss_kib()
        self.fields["seconds"] = round(time.monotonic() - self.t0, 2)
        self.fields["python"] = "%d.%d.%d" % sys.version_info[:3]
        print(self.name + " " + " ".join(f"{k}={v}" for k, v in self.fields.items()), flush=True)


def agent_extension():
    """growtrace's CPython agent extension in this process, or None (untraced, or not yet
    attached). It keeps out of ``sys.modules``: it is found among the collector's objects."""
    import gc
    import types

    for obj in gc.get_objects():
        if isinstance(obj, types.ModuleType) and obj.__dict__.get("__name__") == "_growtrace_agent":
            return obj
    return None


class AgentWalks:
    """The container walks of growtrace's CPython agent (docs/containers.md) made so far.

    A walk runs only once its time has come, so on a loaded machine a run paced by the clock
    may see fewer walks than its test needs. A program calls ``wait_for_walk()`` where it wants
    one, and the walks are there however slow the machine is. The extension is looked for
    once: untraced (or attached later, or with walks off) there is no agent and nothing waits.
    """

    def __init__(self) -> None:
        self._stats = None
        agent = agent_extension()
        if agent is not None:
            stats = agent.__dict__.get("stats")
            if callable(stats) and "walks" in stats() and os.environ.get("GROWTRACE_CONTAINERS") != "0":
                self._stats = stats

    def count(self) -> int | None:
        return self._stats()["walks"] if self._stats else None

    def end_of_phase(self, i: int, total: int, phases: int) -> None:
        """With `total` items cut into `phases` equal phases: waits for a walk when item i
        (from 0) is the last of one."""
        size = total // phases if phases > 0 else 0
        if size and (i + 1) % size == 0:
            self.wait_for_walk()

    def wait_for_walk(self, timeout: float = 30.0) -> None:
        """Returns once a walk has begun after the call (or after `timeout` seconds). A walk
        starts at the stop of a collection, or at a pending call that a Python allocation on the
        main thread queues: meanwhile it keeps objects the collector tracks (a collection comes
        when more are made than freed, so they are held until the walk has run)."""
        before = self.count()
        if before is None:
            return
        deadline = time.monotonic() + timeout
        held = []
        while self.count() == before and time.monotonic() < deadline:
            held.append([_Tracked() for _ in range(100)])
            time.sleep(0.01)


class _Tracked:
    pass
