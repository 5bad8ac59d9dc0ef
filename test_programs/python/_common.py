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
