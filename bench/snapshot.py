#!/usr/bin/env python3
"""Snapshot cost with many suspended tasks, measured on release builds in one run.

Annotated chains (`--no-decode`): for each N in (10_000, 100_000), starts `many_tasks --tasks N`, reports
  - the agent's own time to take a snapshot (`snapshot.capture_ns` of `asyncdump dump --json`),
  - end-to-end wall time of `asyncdump dump PID` (text), `--coalesce` and `--json`, output to /dev/null,
  - the worst poll delay a latency probe task saw before dumps and while dumps ran back to back.
Decoded chains: starts `many_tasks --plain --tasks 10000` (no annotations) and compares, side by side in
the same process, snapshots with a walk plan against snapshots without one:
  - the host-side (agent) time of the snapshot, and the difference per decoded task,
  - the inspector's DWARF load + plan time and the end-to-end `dump --coalesce` time,
  - `asyncdump index` on the same binary, with its .debug_info size.
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
            dump = [f"{BIN}/asyncdump", "dump", str(fx.pid), "--no-decode"]
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

    decoded = decoded_run(10_000)

    def fmt(xs):
        return f"{statistics.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})"

    print("| suspended tasks | agent snapshot ms | `dump` text ms | `dump --coalesce` ms | `dump --json` ms "
          "| worst poll delay before / during dumps | polls delayed > 1 ms during dumps |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, capture, walls, before, after in rows:
        print(f"| {n:,} | {fmt(capture)} | {fmt(walls['text'])} | {fmt(walls['coalesce'])} | {fmt(walls['json'])} "
              f"| {before[0]} µs / {after[0]} µs | {after[1] - before[1]} of {after[2] - before[2]} |")
    print(f"\nmedian (min–max) of {RUNS} runs each")
    n, plain_cap, walk_cap, plan, wall_off, wall_on, index_ms, info_bytes, frames, before, after = decoded
    per_task_us = (statistics.median(walk_cap) - statistics.median(plain_cap)) * 1e3 / n
    print(f"\nDecoded chains: {n:,} unannotated tasks (`many_tasks --plain`), {frames} decoded frames per task, "
          "snapshots with and without a walk plan alternating in one process")
    print("\n| | without walk plan (`--no-decode`) | with walk plan | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| agent (host-side) snapshot ms | {fmt(plain_cap)} | {fmt(walk_cap)} "
          f"| {statistics.median(walk_cap) / statistics.median(plain_cap):.2f}× |")
    print(f"| `dump --coalesce` wall ms | {fmt(wall_off)} | {fmt(wall_on)} "
          f"| {statistics.median(wall_on) / statistics.median(wall_off):.2f}× |")
    print(f"\n- walk per decoded task, host side: {per_task_us:.2f} µs (difference of the medians / {n:,})")
    print(f"- inspector DWARF load + walk plan (`--no-cache`; the `dump` wall times read the plan cache): {fmt(plan)} ms; "
          f"`asyncdump index` of the same binary: "
          f"{fmt(index_ms)} ms; .debug_info {info_bytes:,} bytes")
    print(f"- worst poll delay before / during decoded dumps: {before[0]} µs / {after[0]} µs; "
          f"polls delayed > 1 ms during them: {after[1] - before[1]} of {after[2] - before[2]}")


def chain_depth(task):
    depth, level = 0, task["frames"]
    while level:
        depth += 1
        level = level[0]["children"]
    return depth


def decoded_run(n):
    probe_file = tempfile.mktemp(prefix="asyncdump-probe-")
    exe = f"{BIN}/many_tasks"
    fx = subprocess.Popen([exe, "--plain", "--tasks", str(n), "--probe-file", probe_file],
                          stdout=subprocess.PIPE, text=True, env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "600"})
    try:
        assert fx.stdout.readline().strip() == "ready"
        time.sleep(1.5)
        before = probe(probe_file)
        dump = [f"{BIN}/asyncdump", "dump", str(fx.pid)]
        plain_cap, walk_cap, plan, wall_off, wall_on = [], [], [], [], []
        frames = 0
        for _ in range(RUNS):
            off = json.loads(subprocess.run(dump + ["--json", "--no-decode"], capture_output=True, check=True).stdout)
            # The plan from the DWARF, as a first dump makes it; the timed dumps below read it cached.
            on = json.loads(subprocess.run(dump + ["--json", "--no-cache"], capture_output=True, check=True).stdout)
            assert on["decoding"]["enabled"], on["decoding"]
            plain_cap.append(off["snapshot"]["capture_ns"] / 1e6)
            walk_cap.append(on["snapshot"]["capture_ns"] / 1e6)
            plan.append(on["decoding"]["plan_ns"] / 1e6)
            info_bytes = on["decoding"]["debug_info_bytes"]
            tasks = [t for t in on["tasks"] if t["name"] is None]
            frames = chain_depth(tasks[0])
            assert all(chain_depth(t) == frames for t in tasks)
            wall_off.append(timed(dump + ["--coalesce", "--no-decode"]))
            wall_on.append(timed(dump + ["--coalesce"]))
        index_ms = [timed([f"{BIN}/asyncdump", "index", exe]) for _ in range(RUNS)]
        end = time.time() + 3
        while time.time() < end:
            timed(dump + ["--coalesce"])
        time.sleep(0.3)
        after = probe(probe_file)
        return n, plain_cap, walk_cap, plan, wall_off, wall_on, index_ms, info_bytes, frames, before, after
    finally:
        fx.kill()
        fx.wait()
        os.unlink(probe_file)


if __name__ == "__main__":
    sys.exit(main())
