"""Heavy use of the standard library's own bounded caches: ``re`` and ``typing``.

``re`` keeps compiled patterns in a dict capped at ``re._MAXCACHE`` (512 in 3.11) and
``typing`` caches parametrized generics in ``functools.lru_cache``s (``typing._tp_cache``,
maxsize 128 by default, typed). The program cycles through far more distinct patterns and
generic parametrizations than those limits, round after round, so both caches churn at
their caps. Memory stays bounded; growtrace must not report either cache.
"""

import argparse
import itertools
import os
import re
import sys
import typing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Summary  # noqa: E402

PATTERNS = 2000  # > re._MAXCACHE
BASE_TYPES = (int, str, bytes, float, bool, complex, list, dict, set, tuple, type(None), object)


def patterns():
    for i in range(PATTERNS):
        yield rf"(?P<word>w{i}[a-z]{{1,{i % 7 + 1}}})\d+"


def generics():
    # 12 * 12 = 144 two-argument combinations per alias family, 4 families: 576 distinct
    # parametrizations, beyond typing's default lru_cache maxsize of 128.
    for a, b in itertools.product(BASE_TYPES, repeat=2):
        yield typing.Dict[a, b]
        yield typing.Tuple[a, b]
        yield typing.Union[a, b, typing.List[a]]
        yield typing.Callable[[a], b]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    summary = Summary("re_typing_caches")
    matches = 0
    aliases = 0
    for _ in range(args.rounds):
        for pattern in patterns():
            if re.match(pattern, "w12abc123"):  # mark: re_call
                matches += 1
        for alias in generics():
            aliases += len(typing.get_args(alias))
    summary["rounds"] = args.rounds
    summary["re_cache_entries"] = len(re._cache)
    summary["re_maxcache"] = re._MAXCACHE
    summary["matches"] = matches
    summary["alias_args"] = aliases
    summary.print()


if __name__ == "__main__":
    main()
