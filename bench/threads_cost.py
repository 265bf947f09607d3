#!/usr/bin/env python3
"""What the threads stage costs a dump: two inspectors side by side, in one run, every run
interleaved (OLD, NEW, OLD, NEW, ...), each with a plan cache of its own:
  - `churn`, read without an agent, and a core of it: no task runs, so the stage does not run,
    but `main`'s `block_on` future is read (the target: at most 5 % more than OLD);
  - `demo_service` through its agent, the same;
  - `no_agent`, whose blocking pool thread sleeps in a closure, and `blocked_workers`, whose four
    workers are blocked inside polls: the stage reads their stacks and names their frames (what
    that costs over OLD, which reads none);
and, NEW alone, what `--threads` costs on `churn --idle-threads 100` (every thread's stack read and
named) against the same dump without it.
Prints the median (min-max) of RUNS runs of each and the ratio of medians.
Usage: python3 bench/threads_cost.py OLD_ASYNCDUMP NEW_ASYNCDUMP FIXTURE_DIR [RUNS]
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from checks_cost import start, timed


def fmt(t):
    return f"{statistics.median(t):.1f} ({min(t):.1f}-{max(t):.1f})"


def side_by_side(rows, pairs, envs, runs):
    for label, args in rows:
        times = {name: [] for name, _ in pairs}
        for name, exe in pairs:
            timed([exe, *args], envs[name])  # warm-up, and the plan cache filled
        for _ in range(runs):
            for name, exe in pairs:
                times[name].append(timed([exe, *args], envs[name]) * 1000)
        (a, _), (b, _) = pairs
        ratio = statistics.median(times[b]) / statistics.median(times[a])
        print(f"{label:34} {fmt(times[a]):>24} {fmt(times[b]):>24}  {ratio:.3f}")


def main():
    old, new, fixtures = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    scratch = tempfile.mkdtemp(prefix="threads-cost-")
    procs = []
    try:
        plain = start(os.path.join(fixtures, "no_agent"))
        quiet = start(os.path.join(fixtures, "churn"))
        demo = start(os.path.join(fixtures, "demo_service"))
        blocked = start(os.path.join(fixtures, "blocked_workers"))
        many = start(os.path.join(fixtures, "churn"), ["--idle-threads", "100"])
        procs += [plain, quiet, demo, blocked, many]
        time.sleep(1)
        subprocess.run(["gcore", "-o", os.path.join(scratch, "core"), str(quiet.pid)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        core = os.path.join(scratch, f"core.{quiet.pid}")
        envs = {}
        for name in ("old", "new"):
            cache = os.path.join(scratch, name)
            os.mkdir(cache)
            envs[name] = dict(os.environ, XDG_CACHE_HOME=cache)
        print(f"{'row':34} {'OLD median (min-max) ms':>24} {'NEW median (min-max) ms':>24}  NEW/OLD")
        side_by_side([
            ("churn, no agent (no task runs)", ["dump", str(quiet.pid)]),
            ("a core of churn", ["dump", "--core", core]),
            ("demo_service, through its agent", ["dump", str(demo.pid)]),
            ("no_agent (a closure asleep)", ["dump", str(plain.pid), "--no-agent"]),
            ("blocked_workers, no agent", ["dump", str(blocked.pid), "--all"]),
        ], [("old", old), ("new", new)], envs, runs)
        print(f"\n{'row (NEW alone)':34} {'without --threads':>24} {'with --threads':>24}  with/without")
        pid = str(many.pid)
        times = {"without": [], "with": []}
        for args in (["dump", pid], ["dump", pid, "--threads"]):
            timed([new, *args], envs["new"])
        for _ in range(runs):
            times["without"].append(timed([new, "dump", pid], envs["new"]) * 1000)
            times["with"].append(timed([new, "dump", pid, "--threads"], envs["new"]) * 1000)
        ratio = statistics.median(times["with"]) / statistics.median(times["without"])
        print(f"{'churn --idle-threads 100 (102 thr.)':34} {fmt(times['without']):>24} "
              f"{fmt(times['with']):>24}  {ratio:.3f}")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
