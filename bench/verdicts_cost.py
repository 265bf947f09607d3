#!/usr/bin/env python3
"""What judging costs a dump (a verdict for every waiting task, the root causes ranked): two
inspectors side by side, in one run, every run interleaved (OLD, NEW, ...), each with a plan cache
of its own, on
  - `verdicts`, without its agent and through it: a task per verdict, a chain of lock holders;
  - `blocked_workers`, no agent, `--all`: starved runtimes, running tasks in lock cycles;
  - `waiters --tasks 20000`: every leaf's wait read (a mutex queue or a sleep), every lock waiter
    blocked behind one holder;
  - `mass --tasks 100000`, through its agent: a hundred thousand waiting tasks judged.
The target: one dump (one sample) costs at most 10 % more than OLD, which judges nothing.
Prints the median (min-max) of RUNS runs of each and the ratio of medians.
Usage: python3 bench/verdicts_cost.py OLD_ASYNCDUMP NEW_ASYNCDUMP FIXTURE_DIR [RUNS]
"""
import os
import sys
import tempfile
import time

from checks_cost import plan_caches, start, stop
from threads_cost import side_by_side


def main():
    old, new, fixtures = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    scratch = tempfile.mkdtemp(prefix="verdicts-cost-")
    procs = []
    try:
        fx = lambda name, args=(): start(os.path.join(fixtures, name), list(args))
        plain = fx("verdicts")
        agent = fx("verdicts", ["--agent"])
        blocked = fx("blocked_workers")
        waiters = fx("waiters", ["--tasks", "20000"])
        mass = fx("mass", ["--tasks", "100000", "--changing", "0"])
        procs += [plain, agent, blocked, waiters, mass]
        time.sleep(1)
        envs = plan_caches(scratch)
        print(f"{'row':34} {'OLD median (min-max) ms':>24} {'NEW median (min-max) ms':>24}  NEW/OLD")
        side_by_side([
            ("verdicts, no agent", ["dump", str(plain.pid)]),
            ("verdicts, through its agent", ["dump", str(agent.pid)]),
            ("blocked_workers, no agent, --all", ["dump", str(blocked.pid), "--all"]),
            ("waiters 20,000, no agent", ["dump", str(waiters.pid)]),
            ("mass 100,000, through its agent", ["dump", str(mass.pid)]),
        ], [("old", old), ("new", new)], envs, runs)
    finally:
        stop(procs, scratch)


if __name__ == "__main__":
    main()
