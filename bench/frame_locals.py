#!/usr/bin/env python3
"""What naming threads as holders costs, two inspectors side by side in one run: OLD (a build before
the locals of function bodies were planned and threads' stacks walked) and NEW. hyperfine times
them alternately (warm-up 2, 10 runs each; 5 for the plans from DWARF) on:
  - the release `axum_service` (`init()` only, idle workers): its plan from DWARF (`--no-cache`,
    what the body scan adds), and a dump with the plan from each build's own warm cache (what
    walking its threads' stacks adds);
  - the debug `crawler` (the largest debug binary among the fixtures): the same two;
  - the debug `thread_holders`: a dump, where NEW names three threads; and the same built as
    optimised code (`cargo build --profile optimised-fixtures -p asyncdump-fixtures`), if built.
All without the agent, text to /dev/null. Prints means ± sd in ms and NEW/OLD.
Usage: cargo build --release -p asyncdump -p asyncdump-fixtures && cargo build -p asyncdump-fixtures
       python3 bench/frame_locals.py OLD_ASYNCDUMP NEW_ASYNCDUMP
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")


def start(exe, args=()):
    fx = subprocess.Popen([exe, *args], stdout=subprocess.PIPE, text=True,
                          env=dict(os.environ, ASYNCDUMP_FIXTURE_TIMEOUT="900"))
    atexit.register(fx.kill)
    for line in fx.stdout:
        if line.strip() == "ready":
            break
    else:
        raise AssertionError(f"{exe} did not get ready")
    time.sleep(1)
    return fx


def compare(name, old, new, args, caches, runs=10):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmds = [f"env XDG_CACHE_HOME={caches[0]} {old} {args}",
                f"env XDG_CACHE_HOME={caches[1]} {new} {args}"]
        subprocess.run(["hyperfine", "-N", "--warmup", "2", "--runs", str(runs), "--style", "none",
                        "--export-json", out.name, *cmds], check=True, stdout=subprocess.DEVNULL)
        o, n = json.load(open(out.name))["results"]
    print(f"| {name} | {o['mean'] * 1e3:.1f} ± {o['stddev'] * 1e3:.1f} "
          f"| {n['mean'] * 1e3:.1f} ± {n['stddev'] * 1e3:.1f} | {n['mean'] / o['mean']:.2f} |")


def main():
    old, new = (os.path.abspath(p) for p in sys.argv[1:3])
    caches = [tempfile.mkdtemp(prefix="asyncdump-bench-cache-") for _ in range(2)]
    for c in caches:
        atexit.register(shutil.rmtree, c, True)
    print("| what | old ms | new ms | new/old |\n|---|---|---|---|")
    for name, exe, args in [("axum_service release", "release/axum_service", ["--port", "0"]),
                            ("crawler debug", "debug/crawler", [])]:
        fx = start(os.path.join(TARGET, exe), args)
        compare(f"{name}: plan from DWARF", old, new, f"dump --no-agent --no-cache {fx.pid}", caches, 5)
        compare(f"{name}: dump, plan from the cache", old, new, f"dump --no-agent {fx.pid}", caches)
        fx.kill()
    for build, note in [("debug", ""), ("optimised-fixtures", " (optimised)")]:
        exe = os.path.join(TARGET, build, "thread_holders")
        if not os.path.exists(exe):
            continue
        fx = start(exe)
        compare(f"thread_holders {build}: dump{note}", old, new, f"dump --no-agent {fx.pid}", caches)
        fx.kill()


if __name__ == "__main__":
    main()
