#!/usr/bin/env python3
"""The census's cost: finding runtimes nobody registered, on release builds, in one run.

1. For heaps of 0 and 200 MB (`unregistered --heap MB`: every word written, as a service's caches
   are), per fresh process: the first dump runs a census. Reports the bytes it scanned, its time and
   throughput on one core, and the agent's whole snapshot time (`snapshot.capture_ns`) for that dump
   and for the next one, which lists the lists the census found without scanning again.
2. 100,000 suspended tasks on one runtime against 100,000 over 16 runtimes (`--tasks 100000
   --runtimes R`, none registered): the snapshot and census times of the first and the second dump.
Usage: cargo build --release -p asyncdump -p asyncdump-fixtures && python3 bench/census.py
"""
import json
import os
import statistics
import subprocess

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release")
RUNS = 5


def start(args):
    fx = subprocess.Popen([f"{BIN}/unregistered"] + args, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "600"})
    while fx.stdout.readline().strip() != "ready":
        pass
    return fx


def stop(fx):
    fx.kill()
    fx.wait()
    for d in (f"/tmp/asyncdump-{os.getuid()}",
              os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/nonexistent"), "asyncdump")):
        try:
            os.unlink(os.path.join(d, f"{fx.pid}.sock"))
        except OSError:
            pass


def dump(pid):
    """The JSON document without its tasks (a filter no frame matches): the census and the snapshot's
    times are the agent's, whatever the inspector then shows, and 100,000 tasks of JSON would take
    seconds to parse here."""
    args = [f"{BIN}/asyncdump", "dump", str(pid), "--json", "--type", "no frame is named this"]
    return json.loads(subprocess.run(args, capture_output=True, check=True).stdout)


def two_dumps(args):
    """The first dump (a census) and the second (its lists again) of a fresh process."""
    fx = start(args)
    try:
        first, second = dump(fx.pid), dump(fx.pid)
        assert first["census"]["age_ns"] == 0 and second["census"]["age_ns"] > 0, first["census"]
        return first, second
    finally:
        stop(fx)


def ms(ns):
    return ns / 1e6


def med(xs):
    return statistics.median(xs)


def heaps():
    print("| heap | scanned (MB) | census (ms) | GB/s, one core | snapshot, first dump (ms) "
          "| snapshot, next dump (ms) |")
    print("|---|---|---|---|---|---|")
    for mb in (0, 200):
        runs = [two_dumps(["--heap", str(mb)]) for _ in range(RUNS)]
        scanned = [f["census"]["scanned_bytes"] / 1e6 for f, _ in runs]
        census = [ms(f["census"]["elapsed_ns"]) for f, _ in runs]
        rate = [f["census"]["scanned_bytes"] / f["census"]["elapsed_ns"] for f, _ in runs]
        first = [ms(f["snapshot"]["capture_ns"]) for f, _ in runs]
        second = [ms(s["snapshot"]["capture_ns"]) for _, s in runs]
        assert all(f["census"]["found"] == 4 for f, _ in runs)
        print(f"| {mb} MB | {med(scanned):.1f} | {med(census):.1f} (min {min(census):.1f}, "
              f"max {max(census):.1f}) | {med(rate):.2f} | {med(first):.1f} | {med(second):.2f} |")


def spread():
    print()
    print("| 100,000 tasks over | lists found | census (ms) | snapshot, first dump (ms) "
          "| snapshot, next dump (ms) |")
    print("|---|---|---|---|---|")
    for runtimes in (0, 16):
        runs = [two_dumps(["--tasks", "100000", "--runtimes", str(runtimes)]) for _ in range(RUNS)]
        for f, _ in runs:
            assert f["snapshot"]["tasks_total"] >= 100_000, f["snapshot"]
        found = runs[0][0]["census"]["found"]
        census = [ms(f["census"]["elapsed_ns"]) for f, _ in runs]
        first = [ms(f["snapshot"]["capture_ns"]) for f, _ in runs]
        second = [ms(s["snapshot"]["capture_ns"]) for _, s in runs]
        label = "1 runtime" if runtimes == 0 else f"{runtimes} runtimes"
        print(f"| {label} | {found} | {med(census):.1f} | {med(first):.1f} | {med(second):.1f} |")


if __name__ == "__main__":
    heaps()
    spread()
