#!/usr/bin/env python3
"""Leak check: the soak's load, shorter, with the host under valgrind's memcheck. The `mass` fixture
(release build) spawns and completes short tasks while `asyncdump watch --all` stays subscribed (in
tmux) and `asyncdump dump --all` runs every 2 s; it then exits normally, and valgrind reports what was
never freed. Run twice, for a short and a longer time: a leak in the agent grows with the tasks that
came and went, while what the fixture itself leaves on purpose (senders it forgets so its tasks stay
suspended) does not.

Usage: cargo build --release -p asyncdump -p asyncdump-fixtures && python3 bench/leakcheck.py [S1 S2]
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release")
SESSION = "asyncdump-leakcheck"


def run(seconds, log):
    env = {**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": str(seconds)}
    fx = subprocess.Popen(
        ["valgrind", "--leak-check=full", f"--log-file={log}",
         f"{BIN}/mass", "--tasks", "100", "--changing", "5", "--churn", "500"],
        stdout=subprocess.PIPE, text=True, env=env)
    spawned = 0
    try:
        assert fx.stdout.readline().strip() == "ready", "the fixture did not start"
        subprocess.run(["tmux", "kill-session", "-t", SESSION], stderr=subprocess.DEVNULL)
        subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, "-x", "160", "-y", "45",
                        f"{BIN}/asyncdump watch {fx.pid} --all"], check=True)
        while fx.poll() is None:
            out = subprocess.run([f"{BIN}/asyncdump", "dump", str(fx.pid), "--all", "--json",
                                  "--timeout", "20s"], capture_output=True, text=True)
            if out.returncode == 0:
                spawned = json.loads(out.stdout)["snapshot"]["tasks_spawned"]
            time.sleep(2)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], stderr=subprocess.DEVNULL)
        fx.wait()
    with open(log) as f:
        text = f.read()
    lost = {}
    for kind in ("definitely", "indirectly", "possibly"):
        m = re.search(kind + r" lost: ([\d,]+) bytes in ([\d,]+) blocks", text)
        lost[kind] = int(m.group(1).replace(",", "")) if m else 0
    return spawned, lost, fx.returncode


def main():
    durations = [int(a) for a in sys.argv[1:]] or [20, 60]
    print("| run s | tasks spawned | definitely lost B | indirectly lost B | possibly lost B | exit |")
    print("|---:|---:|---:|---:|---:|---:|")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in durations:
            spawned, lost, code = run(s, os.path.join(tmp, f"valgrind-{s}.log"))
            rows.append((spawned, lost))
            print(f"| {s} | {spawned:,} | {lost['definitely']:,} | {lost['indirectly']:,} | "
                  f"{lost['possibly']:,} | {code} |", flush=True)
    (few, a), (many, b) = rows[0], rows[-1]
    grew = b["definitely"] + b["indirectly"] - a["definitely"] - a["indirectly"]
    print(f"\n{many - few:,} more tasks leave {grew:,} more bytes lost")
    sys.exit(0 if grew <= 0 else 1)


if __name__ == "__main__":
    main()
