"""Compiles a small code object, runs it and drops it, again and again (as template engines do),
printing ``tick N`` every 50 rounds: each round frees a code object, so anything left pointing
at the interpreter's code object destructor is called at once.

    python compile_loop.py SECONDS
"""

import sys
import time


def main() -> None:
    end = time.monotonic() + float(sys.argv[1])
    rounds = 0
    while time.monotonic() < end:
        code = compile(f"value = {rounds} * 2", "<round>", "exec")
        exec(code, {})
        del code
        rounds += 1
        if rounds % 50 == 0:
            print(f"tick {rounds // 50}", flush=True)
        time.sleep(0.001)


main()
