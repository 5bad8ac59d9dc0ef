"""A detach arriving in the middle of one of the agent's walks, made to happen every time.

The agent's walks (and its final walk) run as the agent's own work, through the extension's
own_work(). The walk is Python code: another thread may take the GIL half-way through, and
growtrace's detach does exactly that (it runs on a thread of the tracer's, which takes the GIL
and stops the agent). Waiting for that by timing makes it rare (a few runs in a hundred); here
the work itself stops the agent, as the detach would at that moment, and then returns.

Prints "survived the walk" and exits 0 when the program lived through it; under the tracer,
"no agent" when the extension is not there (the test then fails on the line it expects).
"""

from __future__ import annotations

from _common import agent_extension


def main() -> None:
    agent = agent_extension()
    if agent is None:
        print("no agent", flush=True)
        return

    def walk_during_which_a_detach_takes_the_gil(step: int) -> int:
        agent.stop()  # what the detach does on its own thread, here at a known point
        scratch = [step] * 1000  # and the walk goes on allocating after it
        return len(scratch)

    agent.own_work(walk_during_which_a_detach_takes_the_gil, 1)
    print("survived the walk", flush=True)
    leftover = [bytes(100) for _ in range(1000)]  # the program runs on, allocating
    print(f"then allocated {len(leftover)} objects", flush=True)


if __name__ == "__main__":
    main()
