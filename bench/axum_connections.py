#!/usr/bin/env python3
"""Dump time of the `axum_service` fixture (release build, `init()` only) with 1,000 open connections,
each a request hanging in one of its five handlers (round robin: mutex, sleep, full mpsc, unanswered
oneshot, silent TCP peer), so 1,000 connection tasks whose chains are decoded through hyper, tower and
axum down to the handler's leaf.

Reports the agent's snapshot time (listing the runtime and walking every task), the inspector's plan
(read from the DWARF with `--no-cache`, and from the plan cache), and the end-to-end wall time of `dump`
(text, `--coalesce`, `--json`, the plan from the cache), median (min–max) of 10 runs each. Then the first
plan of the debug build of the same service (`target/debug/axum_service`, no connections), the larger
binary. Usage: cargo build --release --workspace && cargo build -p asyncdump-fixtures --bin axum_service
&& python3 bench/axum_connections.py
"""
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release")
DEBUG_BIN = os.path.join(os.path.dirname(__file__), "..", "target", "debug")
# A plan cache of this run's own: the first dump plans from the DWARF and fills it.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="asyncdump-bench-cache-")
ROUTES = ["/mutex", "/sleep", "/mpsc", "/oneshot", "/peer"]
CONNECTIONS = 1_000
RUNS = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(args):
    t = time.perf_counter()
    subprocess.run(args, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1e3


def fmt(xs):
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})"


def main():
    port = free_port()
    fx = subprocess.Popen([f"{BIN}/axum_service", "--port", str(port), "--limit", str(2 * CONNECTIONS)],
                          stdout=subprocess.PIPE, text=True, env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "600"})
    conns = []
    try:
        assert fx.stdout.readline().strip() == "ready"
        for i in range(CONNECTIONS):
            c = socket.create_connection(("127.0.0.1", port))
            c.sendall(f"GET {ROUTES[i % len(ROUTES)]} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
            conns.append(c)
        dump = [f"{BIN}/asyncdump", "dump", str(fx.pid)]
        # Every connection's chain reaches its handler's leaf before timing starts.
        for _ in range(100):
            doc = json.loads(subprocess.run(dump + ["--json"], capture_output=True, check=True).stdout)
            if doc["snapshot"]["idle"] >= CONNECTIONS + 1:
                break
            time.sleep(0.2)
        else:
            raise SystemExit(f"only {doc['snapshot']['idle']} idle tasks")
        capture, planned, cached = [], [], []
        for _ in range(RUNS):
            doc = json.loads(subprocess.run(dump + ["--json", "--no-cache"], capture_output=True, check=True).stdout)
            capture.append(doc["snapshot"]["capture_ns"] / 1e6)
            planned.append(doc["decoding"]["plan_ns"] / 1e6)
            doc = json.loads(subprocess.run(dump + ["--json"], capture_output=True, check=True).stdout)
            assert doc["decoding"]["plan_cached"], doc["decoding"]
            cached.append(doc["decoding"]["plan_ns"] / 1e6)
        walls = {mode: [timed(dump + extra) for _ in range(RUNS)]
                 for mode, extra in (("text", []), ("coalesce", ["--coalesce"]), ("json", ["--json"]))}
        tasks = doc["snapshot"]["tasks_total"]
        print(f"`axum_service` (release), {CONNECTIONS:,} hanging requests: {tasks} tasks listed, "
              f"{doc['decoding']['plan_types']} future types planned")
        print()
        print("| agent snapshot ms | plan from DWARF ms | plan from cache ms | `dump` text ms | `dump --coalesce` ms | `dump --json` ms |")
        print("|---:|---:|---:|---:|---:|---:|")
        print(f"| {fmt(capture)} | {fmt(planned)} | {fmt(cached)} | {fmt(walls['text'])} | {fmt(walls['coalesce'])} | {fmt(walls['json'])} |")
        print()
        print(f"median (min–max) of {RUNS} runs each; .debug_info {doc['decoding']['debug_info_bytes']:,} bytes, "
              f"binary {os.path.getsize(f'{BIN}/axum_service'):,} bytes")
    finally:
        for c in conns:
            c.close()
        fx.kill()
        fx.wait()

    debug_first_plan()


def debug_first_plan():
    """The first plan of the debug build, which has more DWARF than the release one."""
    port = free_port()
    fx = subprocess.Popen([f"{DEBUG_BIN}/axum_service", "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert fx.stdout.readline().strip() == "ready"
        dump = [f"{BIN}/asyncdump", "dump", str(fx.pid), "--json", "--no-cache"]
        planned = []
        for _ in range(RUNS):
            doc = json.loads(subprocess.run(dump, capture_output=True, check=True).stdout)
            planned.append(doc["decoding"]["plan_ns"] / 1e6)
        print()
        print(f"`axum_service` (debug build, binary {os.path.getsize(f'{DEBUG_BIN}/axum_service'):,} bytes, "
              f".debug_info {doc['decoding']['debug_info_bytes']:,} bytes): first plan "
              f"({doc['decoding']['plan_types']} future types, `--no-cache`) {fmt(planned)} ms")
    finally:
        fx.kill()
        fx.wait()


if __name__ == "__main__":
    main()
