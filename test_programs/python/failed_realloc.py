"""Blocks that a failed realloc leaves alive.

Each round makes two bytearrays, one small enough for pymalloc's pools and one that pymalloc
passes to malloc, keeps both, and asks each to grow to hundreds of terabytes: the realloc
behind that fails (MemoryError) and the old blocks stay, whole and in use. growtrace must
report them alive at the end, at the lines that made them, as they are.
"""

import argparse

SMALL = 300  # pymalloc's own pools (up to 512 bytes)
LARGE = 3000  # passed on to malloc
KEPT = []  # alive until the interpreter's shutdown


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=400)
    args = parser.parse_args()
    kept = KEPT
    failures = 0
    for i in range(args.rounds):
        small = bytearray(SMALL)  # mark: small_block
        large = bytearray(LARGE)  # mark: large_block
        kept.append((small, large))
        for block in (small, large):
            try:
                block *= 1 << 40  # hundreds of terabytes: no allocator gives that
            except MemoryError:
                failures += 1
    assert all(len(s) == SMALL and len(l) == LARGE for s, l in kept)
    print(f"rounds={args.rounds} failed_reallocs={failures} kept={len(kept)}")


if __name__ == "__main__":
    main()
