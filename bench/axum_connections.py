#!/usr/bin/env python3
"""Dump time of the `axum_service` fixture (release build, `init()` only) with 1,000 open connections,
each a request hanging in one of its five handlers (round robin: mutex, sleep, full mpsc, unanswered
oneshot, silent TCP peer), so 1,000 connection tasks whose chains are decoded through hyper, tower and
axum down to the handler's leaf.

Reports the agent's snapshot time (listing the runtime and walking every task), the inspector's DWARF
load and plan, and the end-to-end wall time of `dump` (text, `--coalesce`, `--json`), median (min–max) of
10 runs each. Usage: cargo build --release --workspace && python3 bench/axum_connections.py
"""
import json
import os
import socket
import statistics
import subprocess
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release")
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
        capture, planned = [], []
        for _ in range(RUNS):
            doc = json.loads(subprocess.run(dump + ["--json"], capture_output=True, check=True).stdout)
            capture.append(doc["snapshot"]["capture_ns"] / 1e6)
            planned.append(doc["decoding"]["plan_ns"] / 1e6)
        walls = {mode: [timed(dump + extra) for _ in range(RUNS)]
                 for mode, extra in (("text", []), ("coalesce", ["--coalesce"]), ("json", ["--json"]))}
        tasks = doc["snapshot"]["tasks_total"]
        print(f"`axum_service` (release), {CONNECTIONS:,} hanging requests: {tasks} tasks listed, "
              f"{doc['decoding']['plan_types']} future types planned")
        print()
        print("| agent snapshot ms | DWARF load + plan ms | `dump` text ms | `dump --coalesce` ms | `dump --json` ms |")
        print("|---:|---:|---:|---:|---:|")
        print(f"| {fmt(capture)} | {fmt(planned)} | {fmt(walls['text'])} | {fmt(walls['coalesce'])} | {fmt(walls['json'])} |")
        print()
        print(f"median (min–max) of {RUNS} runs each")
    finally:
        for c in conns:
            c.close()
        fx.kill()
        fx.wait()


if __name__ == "__main__":
    main()
