#!/usr/bin/env python3
"""The three ways of reading a process, side by side in one run (release builds):

  - 100,000 unannotated tasks (`many_tasks --plain --tasks 100000`), every chain decoded: `dump`
    through the agent, `dump --no-agent` (its memory read from outside while it runs) and
    `dump --stop` (every thread held), end to end, text to /dev/null, the plan from the cache; the
    snapshot's own time (`capture_ns`), how long `--stop` held the threads, and the worst poll delay
    the host's probe task saw while each kind of dump ran back to back for 3 s;
  - the `axum_service` fixture with 1,000 hanging requests: the same three;
  - a core of the 100,000-task process (gdb's `gcore`): its size and `dump --core` end to end;
  - a core of over 1 GiB: 10,000 tasks beside 1,000 MB of other heap (`unregistered --heap 1000`).

Median (min–max) of 10 runs each. Usage:
  cargo build --release -p asyncdump -p asyncdump-fixtures && python3 bench/agentless.py
"""
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release")
import atexit
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="asyncdump-bench-cache-")
# The run's own plan cache, gone with it.
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], True)
RUNS = 10
MODES = (("agent", []), ("--no-agent", ["--no-agent"]), ("--stop", ["--stop"]))


def timed(args):
    t = time.perf_counter()
    subprocess.run(args, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1e3


def fmt(xs):
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})"


def doc(args):
    return json.loads(subprocess.run(args + ["--json"], capture_output=True, check=True).stdout)


def probe(path):
    """The probe's worst delay so far (µs), its samples over 1 ms, and all its samples."""
    with open(path) as f:
        return [int(x) for x in f.read().split()]


def delay(dump, probe_file, seconds=3):
    """What the host's probe saw over `seconds` of back-to-back dumps: samples over 1 ms of all, and
    the worst delay when it rose past the worst seen before (the probe keeps a running maximum)."""
    time.sleep(0.3)
    end = time.time() + seconds
    (w0, o0, s0) = probe(probe_file)
    while time.time() < end:
        timed(dump)
    time.sleep(0.3)
    (w1, o1, s1) = probe(probe_file)
    worst = f"{w1}" if w1 > w0 else f"≤ {w0}"
    return f"{o1 - o0} of {s1 - s0}; worst {worst}"


def table(title, dump, settled, probe_file=None):
    for _ in range(100):
        if settled(doc(dump)):
            break
        time.sleep(0.2)
    else:
        raise SystemExit(f"{title}: never settled")
    for _, extra in MODES:
        doc(dump + extra)  # the plan cache is warm for each before timing
    print(f"### {title}")
    print()
    print("| read | `dump` end to end ms | snapshot ms | threads held ms | host poll delays over 1 ms (µs) |")
    print("|---|---:|---:|---:|---:|")
    for name, extra in MODES:
        walls = [timed(dump + extra) for _ in range(RUNS)]
        docs = [doc(dump + extra) for _ in range(RUNS)]
        capture = [d["snapshot"]["capture_ns"] / 1e6 for d in docs]
        held = [d["snapshot"].get("stopped", {}).get("held_ns", 0) / 1e6 for d in docs]
        seen = delay(dump + extra, probe_file) if probe_file else "–"
        print(f"| {name} | {fmt(walls)} | {fmt(capture)} | {fmt(held) if extra == ['--stop'] else '–'} | {seen} |")
    print()


def many_tasks():
    probe_file = tempfile.mktemp(prefix="asyncdump-probe-")
    fx = subprocess.Popen([f"{BIN}/many_tasks", "--plain", "--tasks", "100000", "--probe-file", probe_file],
                          stdout=subprocess.PIPE, text=True, env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "900"})
    try:
        assert fx.stdout.readline().strip() == "ready"
        dump = [f"{BIN}/asyncdump", "dump", str(fx.pid)]
        table("100,000 decoded tasks (`many_tasks --plain`)", dump,
              lambda d: d["snapshot"]["idle"] >= 100_000, probe_file)
        core_of(fx.pid)
    finally:
        fx.kill()
        fx.wait()
        os.unlink(probe_file)


def big_core():
    fx = subprocess.Popen([f"{BIN}/unregistered", "--tasks", "10000", "--heap", "1000"],
                          stdout=subprocess.PIPE, text=True, env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "900"})
    try:
        for line in fx.stdout:
            if line.strip() == "ready":
                break
        core_of(fx.pid)
    finally:
        fx.kill()
        fx.wait()


def core_of(pid):
    d = tempfile.mkdtemp(prefix="asyncdump-bench-core-")
    try:
        subprocess.run(["gcore", "-o", f"{d}/core", str(pid)], capture_output=True, check=True)
        core = f"{d}/core.{pid}"
        dump = [f"{BIN}/asyncdump", "dump", "--core", core]
        doc(dump)
        walls = [timed(dump) for _ in range(RUNS)]
        d1 = doc(dump)
        print(f"### A core of it (`gcore`): {os.path.getsize(core) / 2**30:.2f} GiB, "
              f"{d1['snapshot']['tasks_total']:,} tasks")
        print()
        print(f"`dump --core` end to end {fmt(walls)} ms; the census scanned "
              f"{d1['census']['scanned_bytes'] / 2**20:.0f} MB of it.")
        print()
    finally:
        shutil.rmtree(d)


def axum():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fx = subprocess.Popen([f"{BIN}/axum_service", "--port", str(port), "--limit", "2000"],
                          stdout=subprocess.PIPE, text=True, env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "900"})
    conns = []
    routes = ["/mutex", "/sleep", "/mpsc", "/oneshot", "/peer"]
    try:
        assert fx.stdout.readline().strip() == "ready"
        for i in range(1000):
            c = socket.create_connection(("127.0.0.1", port))
            c.sendall(f"GET {routes[i % 5]} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
            conns.append(c)
        dump = [f"{BIN}/asyncdump", "dump", str(fx.pid)]
        table("`axum_service`, 1,000 hanging requests", dump, lambda d: d["snapshot"]["idle"] >= 1001)
    finally:
        for c in conns:
            c.close()
        fx.kill()
        fx.wait()


if __name__ == "__main__":
    many_tasks()
    big_core()
    axum()
