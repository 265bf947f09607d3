#!/usr/bin/env python3
"""Instructions (callgrind, deterministic where timings on a shared VM are not) of the worst cases
of bench/values.py: `dump -v` against a plain dump of `locals --tasks 10000`, and a dump against
`--no-targets` of `waiters --tasks 10000` and `lock_cycle --pairs 5000`, without the agent, for
each inspector given (e.g. one built from an earlier commit, then target/release/asyncdump), each
with a plan cache of its own, warmed first. Usage:
  cargo build --release -p asyncdump -p asyncdump-fixtures
  python3 bench/values_callgrind.py OLD target/release/asyncdump
"""
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release")
CASES = [
    (["locals", "--tasks", "10000"], [], ["-v"]),
    (["waiters", "--tasks", "10000"], ["--no-targets"], []),
    (["lock_cycle", "--pairs", "5000"], ["--no-targets"], []),
]


def instructions(args, env):
    with tempfile.TemporaryDirectory(prefix="asyncdump-bench-cg-") as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *args],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
        return int(re.search(r"^summary: (\d+)", open(out).read(), re.M).group(1))


def main():
    inspectors = []
    for binary in sys.argv[1:]:
        cache = tempfile.mkdtemp(prefix="asyncdump-bench-cache-")
        atexit.register(shutil.rmtree, cache, True)
        inspectors.append((binary, {**os.environ, "XDG_CACHE_HOME": cache}))
    print("| fixture | inspector | the first (M instructions) | the second | ratio |")
    print("|---|---|---:|---:|---:|")
    for fixture, first, second in CASES:
        fx = subprocess.Popen([f"{BIN}/{fixture[0]}", *fixture[1:]], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "600"})
        try:
            assert fx.stdout.readline().strip() == "ready"
            time.sleep(1)
            for binary, env in inspectors:
                dump = [binary, "dump", str(fx.pid), "--no-agent"]
                subprocess.run(dump, stdout=subprocess.DEVNULL, check=True, env=env)
                a, b = instructions(dump + first, env), instructions(dump + second, env)
                name = " ".join(fixture)
                print(f"| `{name}` | {binary} | {a / 1e6:.1f} | {b / 1e6:.1f} | {b / a:.2f}× |")
        finally:
            fx.kill()
            fx.wait()


main()
