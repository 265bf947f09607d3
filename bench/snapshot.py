#!/usr/bin/env python3
"""Snapshot cost with many suspended tasks, measured on release builds in one run.

Annotated chains (`--no-decode`): for each N in (10_000, 100_000), starts `many_tasks --tasks N`, reports
  - the agent's own time to take a snapshot (`snapshot.capture_ns` of `asyncdump dump --json`),
  - end-to-end wall time of `asyncdump dump PID` (text), `--coalesce` and `--json`, output to /dev/null,
  - the worst poll delay a latency probe task saw before dumps and while dumps ran back to back,
  - for 100,000, the inspector's peak memory for each.
The same for 100,000 unannotated tasks, every chain decoded (`many_tasks --plain`, plan cached). And the
machine's own poll delay under load with no dump: two idle-priority busy loops instead.
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


def peak_mb(args):
    """The command's peak resident memory in MB, by GNU time: `ru_maxrss` of a child of this script would
    start at this script's own, which survives the exec."""
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + args, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, check=True).stderr
    return int(out.split()[-1]) / 1024


def start(args):
    """Starts a fixture with a probe file; returns the process and the file once it is ready."""
    probe_file = tempfile.mktemp(prefix="asyncdump-probe-")
    fx = subprocess.Popen(args + ["--probe-file", probe_file], stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "600"})
    assert fx.stdout.readline().strip() == "ready"
    return fx, probe_file


def stop(fx, probe_file):
    fx.kill()
    fx.wait()
    os.unlink(probe_file)
    # A killed agent leaves its socket behind.
    for d in (f"/tmp/asyncdump-{os.getuid()}", os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/nonexistent"), "asyncdump")):
        try:
            os.unlink(os.path.join(d, f"{fx.pid}.sock"))
        except OSError:
            pass


def back_to_back(dump, seconds=3):
    end = time.time() + seconds
    while time.time() < end:
        timed(dump)
    time.sleep(0.3)


def load_baseline(n):
    """The probe's worst delay with no dump at all, while two busy loops at idle priority (`chrt -i 0`)
    take the CPU a dump would: what this machine does to a poll under load, whoever causes the load."""
    fx, probe_file = start([f"{BIN}/many_tasks", "--tasks", str(n)])
    try:
        time.sleep(1.5)
        before = probe(probe_file)
        hogs = [subprocess.Popen(["chrt", "-i", "0", "sh", "-c", "while :; do :; done"]) for _ in range(2)]
        time.sleep(6)
        for h in hogs:
            h.kill()
            h.wait()
        time.sleep(0.3)
        return before, probe(probe_file)
    finally:
        stop(fx, probe_file)


def decoded_100k(n):
    """Every chain decoded (`many_tasks --plain`), plan cached: wall time, capture, peak memory."""
    fx, probe_file = start([f"{BIN}/many_tasks", "--plain", "--tasks", str(n)])
    try:
        time.sleep(1.5)
        before = probe(probe_file)
        dump = [f"{BIN}/asyncdump", "dump", str(fx.pid)]
        timed(dump + ["--coalesce"])  # fills the plan cache
        capture = []
        for _ in range(5):
            doc = json.loads(subprocess.run(dump + ["--json"], capture_output=True, check=True).stdout)
            assert doc["decoding"]["enabled"] and doc["decoding"]["plan_cached"], doc["decoding"]
            capture.append(doc["snapshot"]["capture_ns"] / 1e6)
        modes = (("text", []), ("coalesce", ["--coalesce"]), ("json", ["--json"]))
        walls = {mode: [timed(dump + extra) for _ in range(5)] for mode, extra in modes}
        peaks = {mode: peak_mb(dump + extra) for mode, extra in modes}
        back_to_back(dump + ["--coalesce"])
        return capture, walls, peaks, before, probe(probe_file)
    finally:
        stop(fx, probe_file)


def main():
    rows, peaks = [], {}
    for n in (10_000, 100_000):
        fx, probe_file = start([f"{BIN}/many_tasks", "--tasks", str(n)])
        try:
            time.sleep(1.5)
            before = probe(probe_file)
            dump = [f"{BIN}/asyncdump", "dump", str(fx.pid), "--no-decode"]
            capture = []
            for _ in range(RUNS):
                doc = json.loads(subprocess.run(dump + ["--json"], capture_output=True, check=True).stdout)
                assert doc["snapshot"]["tasks_total"] >= n
                capture.append(doc["snapshot"]["capture_ns"] / 1e6)
            modes = (("text", []), ("coalesce", ["--coalesce"]), ("json", ["--json"]))
            walls = {mode: [timed(dump + extra) for _ in range(RUNS)] for mode, extra in modes}
            peaks[n] = {mode: peak_mb(dump + extra) for mode, extra in modes}
            back_to_back(dump + ["--coalesce"])
            rows.append((n, capture, walls, before, probe(probe_file)))
        finally:
            stop(fx, probe_file)

    decoded = decoded_run(10_000)
    big = decoded_100k(100_000)
    baseline = load_baseline(100_000)

    def fmt(xs):
        return f"{statistics.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})"

    print("| suspended tasks | agent snapshot ms | `dump` text ms | `dump --coalesce` ms | `dump --json` ms "
          "| worst poll delay before / during dumps | polls delayed > 1 ms during dumps |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, capture, walls, before, after in rows:
        print(f"| {n:,} | {fmt(capture)} | {fmt(walls['text'])} | {fmt(walls['coalesce'])} | {fmt(walls['json'])} "
              f"| {before[0]} µs / {after[0]} µs | {after[1] - before[1]} of {after[2] - before[2]} |")
    print(f"\nmedian (min–max) of {RUNS} runs each")
    capture, walls, big_peaks, before, after = big
    print("\n100,000 tasks, every chain decoded (`many_tasks --plain`, plan cached; median (min–max) of 5):\n")
    print("| suspended tasks | agent snapshot ms | `dump` text ms | `dump --coalesce` ms | `dump --json` ms "
          "| worst poll delay before / during dumps | polls delayed > 1 ms during dumps |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| 100,000 decoded | {fmt(capture)} | {fmt(walls['text'])} | {fmt(walls['coalesce'])} | {fmt(walls['json'])} "
          f"| {before[0]} µs / {after[0]} µs | {after[1] - before[1]} of {after[2] - before[2]} |")
    print("\nThe inspector's peak memory (its own resident set, one dump each), MB:\n")
    print("| 100,000 tasks | text | `--coalesce` | `--json` | per task, worst |")
    print("|---|---:|---:|---:|---:|")
    for name, p in (("annotated (`--no-decode`)", peaks[100_000]), ("decoded", big_peaks)):
        print(f"| {name} | {p['text']:.0f} | {p['coalesce']:.0f} | {p['json']:.0f} "
              f"| {max(p.values()) * 1024 / 100_000:.2f} KiB |")
    before, after = baseline
    print(f"\nThe machine's own delay under load, no dump: with two busy loops at idle priority (`chrt -i 0`) "
          f"for 6 s, the probe's worst delay went from {before[0]} µs to {after[0]} µs; "
          f"{after[1] - before[1]} of {after[2] - before[2]} polls were delayed > 1 ms.")
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
    exe = f"{BIN}/many_tasks"
    fx, probe_file = start([exe, "--plain", "--tasks", str(n)])
    try:
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
        back_to_back(dump + ["--coalesce"])
        after = probe(probe_file)
        return n, plain_cap, walk_cap, plan, wall_off, wall_on, index_ms, info_bytes, frames, before, after
    finally:
        stop(fx, probe_file)


if __name__ == "__main__":
    sys.exit(main())
