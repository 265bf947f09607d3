#!/usr/bin/env python3
"""What reading a service's requests, sockets and groups costs a dump: two inspectors side by
side, in one run, every run interleaved (OLD, NEW, ...), each with a plan cache of its own, on
  - `axum_service` with six requests hanging over HTTP/1 (each a task holding its request, each
    connection's socket registered with tokio's I/O driver): `dump`, `--coalesce`, `--stats`;
  - `tonic_service` with its client's five calls pending over one HTTP/2 connection: `dump`.
Prints the median (min-max) of RUNS runs of each and the ratio of medians.
Usage: python3 bench/services_cost.py OLD_ASYNCDUMP NEW_ASYNCDUMP FIXTURE_DIR [RUNS]
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from threads_cost import side_by_side


def serve(exe, args=()):
    """A service fixture, once it says `ready`, and the port it printed before."""
    fx = subprocess.Popen([exe, *args], stdout=subprocess.PIPE, text=True,
                          env=dict(os.environ, ASYNCDUMP_FIXTURE_TIMEOUT="600"))
    port = None
    for line in fx.stdout:
        if line.startswith("port "):
            port = int(line.split()[1])
        if line.strip() == "ready":
            return fx, port
    raise RuntimeError(f"{exe} did not get ready")


def main():
    old, new, fixtures = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    scratch = tempfile.mkdtemp(prefix="services-cost-")
    procs, conns = [], []
    try:
        axum, port = serve(os.path.join(fixtures, "axum_service"))
        procs.append(axum)
        for path in ["/mutex", "/sleep", "/mpsc", "/oneshot", "/peer", "/mutex"]:
            c = socket.create_connection(("127.0.0.1", port))
            c.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
            conns.append(c)
        tonic, tport = serve(os.path.join(fixtures, "tonic_service"))
        procs.append(tonic)
        client, _ = serve(os.path.join(fixtures, "tonic_service"), ["--client", str(tport)])
        procs.append(client)
        time.sleep(1)
        envs = {}
        for name in ("old", "new"):
            cache = os.path.join(scratch, name)
            os.mkdir(cache)
            envs[name] = dict(os.environ, XDG_CACHE_HOME=cache)
        print(f"{'row':34} {'OLD median (min-max) ms':>24} {'NEW median (min-max) ms':>24}  NEW/OLD")
        a, t = str(axum.pid), str(tonic.pid)
        side_by_side([
            ("axum_service, 6 requests", ["dump", a]),
            ("axum_service --coalesce", ["dump", a, "--coalesce"]),
            ("axum_service --stats", ["dump", a, "--stats"]),
            ("tonic_service, 5 calls", ["dump", t]),
        ], [("old", old), ("new", new)], envs, runs)
    finally:
        for c in conns:
            c.close()
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
