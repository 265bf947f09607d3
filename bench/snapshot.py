#!/usr/bin/env python3
"""Snapshot cost with many suspended tasks, measured on release builds in one run.

For each N in (10_000, 100_000): starts `many_tasks --tasks N`, then reports
  - the agent's own time to take a snapshot (`snapshot.capture_ns` of `asyncdump dump --json`),
  - end-to-end wall time of `asyncdump dump PID` (text), `--coalesce` and `--json`, output to /dev/null,
  - the worst poll delay a latency probe task saw before dumps and while dumps ran back to back.
Usage: cargo build --release --workspace && python3 bench/snapshot.py
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release")
RUNS = 10


def probe(path):
    with open(path) as f:
        worst, over, samples = (int(x) for x in f.read().split())
    return worst, over, samples


def timed(args):
    t = time.perf_counter()
    subprocess.run(args, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1e3


def main():
    rows = []
    for n in (10_000, 100_000):
        probe_file = tempfile.mktemp(prefix="asyncdump-probe-")
        fx = subprocess.Popen([f"{BIN}/many_tasks", "--tasks", str(n), "--probe-file", probe_file],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "600"})
        try:
            assert fx.stdout.readline().strip() == "ready"
            time.sleep(1.5)
            before = probe(probe_file)
            dump = [f"{BIN}/asyncdump", "dump", str(fx.pid)]
            capture = []
            for _ in range(RUNS):
                doc = json.loads(subprocess.run(dump + ["--json"], capture_output=True, check=True).stdout)
                assert doc["snapshot"]["tasks_total"] >= n
                capture.append(doc["snapshot"]["capture_ns"] / 1e6)
            walls = {mode: [timed(dump + extra) for _ in range(RUNS)]
                     for mode, extra in (("text", []), ("coalesce", ["--coalesce"]), ("json", ["--json"]))}
            # Back to back for a few seconds, then read the probe again.
            end = time.time() + 3
            while time.time() < end:
                timed(dump + ["--coalesce"])
            time.sleep(0.3)
            after = probe(probe_file)
            rows.append((n, capture, walls, before, after))
        finally:
            fx.kill()
            fx.wait()
            os.unlink(probe_file)
            for d in (f"/tmp/asyncdump-{os.getuid()}", os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/nonexistent"), "asyncdump")):
                try:
                    os.unlink(os.path.join(d, f"{fx.pid}.sock"))
                except OSError:
                    pass

    def fmt(xs):
        return f"{statistics.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})"

    print("| suspended tasks | agent snapshot ms | `dump` text ms | `dump --coalesce` ms | `dump --json` ms "
          "| worst poll delay before / during dumps | polls delayed > 1 ms during dumps |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, capture, walls, before, after in rows:
        print(f"| {n:,} | {fmt(capture)} | {fmt(walls['text'])} | {fmt(walls['coalesce'])} | {fmt(walls['json'])} "
              f"| {before[0]} µs / {after[0]} µs | {after[1] - before[1]} of {after[2] - before[2]} |")
    print(f"\nmedian (min–max) of {RUNS} runs each")


if __name__ == "__main__":
    sys.exit(main())
