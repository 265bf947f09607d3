#!/usr/bin/env python3
"""What the reliability checks cost an ordinary dump: two inspectors side by side, in one run, every
run interleaved (OLD, NEW, OLD, NEW, ...), on the same fixtures, each inspector with a plan cache of
its own:
  - `no_agent`, read without an agent (the `/proc` checks of a process, the freeze's neighbours);
  - the same, planned from the DWARF each time (`--no-cache`: executables read as the plan asks);
  - a core of it (`dump --core`: the core's notes and census regions);
  - `demo_service` through its agent;
  - `ps` (string tables read a megabyte at a time).
Prints the median (min-max) of RUNS runs of each and the ratio of medians, NEW/OLD.
Usage: python3 bench/checks_cost.py OLD_ASYNCDUMP NEW_ASYNCDUMP FIXTURE_DIR [RUNS]
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def start(exe, args=()):
    fx = subprocess.Popen([exe, *args], stdout=subprocess.PIPE, text=True,
                          env=dict(os.environ, ASYNCDUMP_FIXTURE_TIMEOUT="600"))
    line = fx.stdout.readline()
    assert line.strip() == "ready", line
    return fx


def plan_caches(scratch):
    """An environment for each of OLD and NEW, each with a plan cache of its own in `scratch`."""
    envs = {}
    for name in ("old", "new"):
        cache = os.path.join(scratch, name)
        os.mkdir(cache)
        envs[name] = dict(os.environ, XDG_CACHE_HOME=cache)
    return envs


def stop(procs, scratch):
    """Ends the fixtures and removes the scratch directory."""
    for p in procs:
        p.kill()
        p.wait()
    shutil.rmtree(scratch, ignore_errors=True)


def timed(cmd, env):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - t


def main():
    old, new, fixtures = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    scratch = tempfile.mkdtemp(prefix="checks-cost-")
    procs = []
    try:
        plain = start(os.path.join(fixtures, "no_agent"))
        demo = start(os.path.join(fixtures, "demo_service"))
        procs += [plain, demo]
        time.sleep(1)
        subprocess.run(["gcore", "-o", os.path.join(scratch, "core"), str(plain.pid)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        core = os.path.join(scratch, f"core.{plain.pid}")
        rows = [
            ("no agent", ["dump", str(plain.pid), "--no-agent"]),
            ("no agent, --no-cache", ["dump", str(plain.pid), "--no-agent", "--no-cache"]),
            ("core", ["dump", "--core", core]),
            ("agent (demo)", ["dump", str(demo.pid)]),
            ("ps", ["ps"]),
        ]
        envs = {}
        for name in ("old", "new"):
            cache = os.path.join(scratch, name)
            os.mkdir(cache)
            envs[name] = dict(os.environ, XDG_CACHE_HOME=cache)
        print(f"{'row':24} {'OLD median (min-max) ms':>28} {'NEW median (min-max) ms':>28}  NEW/OLD")
        for label, args in rows:
            times = {"old": [], "new": []}
            for exe, name in ((old, "old"), (new, "new")):
                timed([exe, *args], envs[name])  # warm-up, and the plan cache filled
            for _ in range(runs):
                for exe, name in ((old, "old"), (new, "new")):
                    times[name].append(timed([exe, *args], envs[name]) * 1000)
            o, n = statistics.median(times["old"]), statistics.median(times["new"])
            fmt = lambda t: f"{statistics.median(t):.1f} ({min(t):.1f}-{max(t):.1f})"
            print(f"{label:24} {fmt(times['old']):>28} {fmt(times['new']):>28}  {n / o:.3f}")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
