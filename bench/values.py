#!/usr/bin/env python3
"""What `dump -v` costs over a plain dump, and what decoding each leaf's wait target costs over a
dump without (`--no-targets`), side by side in one run (release builds), at 10,000 tasks:

  - `locals --tasks 10000 --agent`: each task suspended in one async fn holding 15 locals of every
    kind `-v` formats (a struct, strings, a Vec, Option/Result, Box, Arc, Duration, Instant, ...);
  - `many_tasks --plain --tasks 10000`: each task two frames deep, one oneshot receiver per frame
    (the common case: few locals, most of them opaque);
  - `waiters --tasks 10000 --agent`, for the targets: every task's leaf is decoded (5,000 queue for
    one held `Mutex`, 5,000 sleep), the worst case for the leaves;
  - `many_tasks --plain --tasks 10000`, for the targets too: leaves with no target to decode (a
    `oneshot` receive each), what targets cost a dump where there is little to say;
  - `demo_service`: the demo's mix (a lock, a channel, sleeps, a socket, ...), a few tasks;
  - `lock_cycle --pairs 5000 --agent`, for the wait graph: every task holds a `MutexGuard` (read
    to find holders) and waits for the other of its pair's, 5,000 deadlocks, the worst case for
    holders.

Each read through the agent and without it (`--no-agent`); text to /dev/null, the plan from the
cache. Median (min–max) of 15 runs each, and the ratio of medians. Given another inspector (`OLD`,
e.g. one built from an earlier commit), each row is measured with both, all runs interleaved, each
inspector with a plan cache of its own. Given `--old-fixtures DIR` instead (fixtures built from an
earlier commit, so with its agent), each row is measured with this inspector against both builds of
the fixture, each running, all runs interleaved: what the agent's changes did. Usage:
  cargo build --release -p asyncdump -p asyncdump-fixtures && python3 bench/values.py [OLD]
  python3 bench/values.py --old-fixtures DIR
"""
import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release")
RUNS = 15


def cache():
    """A plan cache of its own: a cache written by another inspector build is planned again."""
    path = tempfile.mkdtemp(prefix="asyncdump-bench-cache-")
    atexit.register(shutil.rmtree, path, True)
    return {**os.environ, "XDG_CACHE_HOME": path}


# (label, inspector, environment, fixtures' directory); the new one last.
INSPECTORS = [("new", f"{BIN}/asyncdump", cache(), BIN)]
if sys.argv[1:2] == ["--old-fixtures"]:
    INSPECTORS.insert(0, ("before", f"{BIN}/asyncdump", cache(), sys.argv[2]))
elif len(sys.argv) > 1:
    INSPECTORS.insert(0, ("old", sys.argv[1], cache(), BIN))


def timed(args, env):
    t = time.perf_counter()
    subprocess.run(args, stdout=subprocess.DEVNULL, check=True, env=env)
    return (time.perf_counter() - t) * 1e3


def size(args, env):
    return len(subprocess.run(args, capture_output=True, check=True, env=env).stdout)


def fmt(xs):
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})"


def start(directory, fixture):
    fx = subprocess.Popen([f"{directory}/{fixture[0]}", *fixture[1:]], stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "600"})
    assert fx.stdout.readline().strip() == "ready"
    return fx


def bench(title, fixture, base=(), more=("-v",), header="plain dump ms | `-v` ms"):
    fixtures = {}
    try:
        for *_, directory in INSPECTORS:
            if directory not in fixtures:
                fixtures[directory] = start(directory, fixture)
        time.sleep(1)
        print(f"### {title}")
        print()
        column = "agent" if sys.argv[1:2] == ["--old-fixtures"] else "inspector"
        print(f"| read | {column} | {header} | ratio | text bytes, the first → the second |")
        print("|---|---|---:|---:|---:|---:|")
        for name, extra in (("agent", []), ("--no-agent", ["--no-agent"])):
            cmds = []
            for label, binary, env, directory in INSPECTORS:
                dump = [binary, "dump", str(fixtures[directory].pid), *extra]
                cmds.append((label, env, dump + list(base), dump + list(more)))
                timed(dump + list(more), env)  # warms the plan cache
            times = {label: ([], []) for label, *_ in cmds}
            for _ in range(RUNS):  # interleaved, so that drift hits all alike
                for label, env, first, second in cmds:
                    times[label][0].append(timed(first, env))
                    times[label][1].append(timed(second, env))
            for label, env, first, second in cmds:
                plain, values = times[label]
                ratio = statistics.median(values) / statistics.median(plain)
                sizes = f"{size(first, env):,} → {size(second, env):,}"
                print(f"| {name} | {label} | {fmt(plain)} | {fmt(values)} | {ratio:.2f}× | {sizes} |")
        print()
    finally:
        for fx in fixtures.values():
            fx.kill()
            fx.wait()


bench("10,000 tasks holding 15 locals each (`locals --tasks 10000 --agent`)",
      ["locals", "--tasks", "10000", "--agent"])
bench("10,000 tasks, two frames and one receiver each (`many_tasks --plain --tasks 10000`)",
      ["many_tasks", "--plain", "--tasks", "10000"])
bench("10,000 tasks each at a decoded wait target (`waiters --tasks 10000 --agent`)",
      ["waiters", "--tasks", "10000", "--agent"], base=("--no-targets",), more=(),
      header="`--no-targets` ms | `dump` ms")
bench("10,000 tasks at leaves with nothing to decode (`many_tasks --plain --tasks 10000`)",
      ["many_tasks", "--plain", "--tasks", "10000"], base=("--no-targets",), more=(),
      header="`--no-targets` ms | `dump` ms")
bench("The demo's mix of waits (`demo_service`)",
      ["demo_service"], base=("--no-targets",), more=(),
      header="`--no-targets` ms | `dump` ms")
bench("10,000 tasks each holding a lock and waiting for another (`lock_cycle --pairs 5000 --agent`)",
      ["lock_cycle", "--pairs", "5000", "--agent"], base=("--no-targets",), more=(),
      header="`--no-targets` ms | `dump` ms")
