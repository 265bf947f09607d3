#!/usr/bin/env python3
"""Soak: the `mass` fixture (release build) spawning and completing 10,000 short tasks a second for
100 s (a million in all) on top of 1,000 idle ones, while `asyncdump watch` stays subscribed (in tmux)
and `asyncdump dump --all` runs every 5 s. Prints the host's resident memory every 10 s, the tasks
spawned so far, and the last dump's size: the agent's memory must stay bounded however many tasks
come and go.

Usage: cargo build --release -p asyncdump -p asyncdump-fixtures && python3 bench/soak.py [SECONDS]
"""
import json
import os
import subprocess
import sys
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release")
SESSION = "asyncdump-soak"


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    fx = subprocess.Popen([f"{BIN}/mass", "--tasks", "1000", "--changing", "10", "--churn", "10000"],
                          stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": str(seconds + 60)})
    try:
        assert fx.stdout.readline().strip() == "ready"
        subprocess.run(["tmux", "kill-session", "-t", SESSION], stderr=subprocess.DEVNULL)
        subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, "-x", "160", "-y", "45",
                        f"{BIN}/asyncdump watch {fx.pid} --all"], check=True)
        print("| s | host RSS MB | tasks spawned | tasks in the last dump |")
        print("|---:|---:|---:|---:|")
        start = time.time()
        next_sample = 0
        spawned, listed = 0, 0
        while time.time() - start < seconds:
            out = subprocess.run([f"{BIN}/asyncdump", "dump", str(fx.pid), "--all", "--json"],
                                 capture_output=True, text=True)
            if out.returncode == 0:
                doc = json.loads(out.stdout)
                spawned, listed = doc["snapshot"]["tasks_spawned"], doc["snapshot"]["tasks_total"]
            elapsed = time.time() - start
            if elapsed >= next_sample:
                print(f"| {elapsed:.0f} | {rss_mb(fx.pid):.1f} | {spawned:,} | {listed:,} |", flush=True)
                next_sample += 10
            time.sleep(5)
        print(f"| {time.time() - start:.0f} | {rss_mb(fx.pid):.1f} | {spawned:,} | {listed:,} |")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], stderr=subprocess.DEVNULL)
        fx.kill()
        fx.wait()


if __name__ == "__main__":
    main()
