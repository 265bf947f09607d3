#!/usr/bin/env python3
"""What the live view costs with 100,000 tasks: the `mass` fixture (release build) with 100,000 idle
tasks and 100 that wake about every 100 ms, watched at the default 4 updates a second.

1. Updates (`examples/subscription_cost`, 40 updates at 250 ms): per update, its size on the wire, the
   agent's time on it and the inspector's time to apply it and rebuild the dump; medians (min–max) for
   the updates that carry only changes, and apart from them the full state and the updates on which
   the agent also listed the registered runtime (its 100,000 tasks: see the agent's subscription module).
2. `asyncdump watch` in tmux (160x45): its CPU over 20 s, from /proc, and its update rate.
3. Key to redraw: time from `tmux send-keys` to the changed screen in `capture-pane` (polled every
   2 ms, so an upper bound that includes tmux), for `o` (sort by the next column) and for a search
   typed one letter at a time; median (max) of 12 keys each.

Usage: cargo build --release -p asyncdump -p asyncdump-fixtures --example subscription_cost --bin mass
       && python3 bench/watch_mass.py
"""
import os
import statistics
import subprocess
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release")
TASKS = 100_000
SESSION = "asyncdump-bench-watch"


def fmt(xs, unit=""):
    if not xs:
        return "-"
    return f"{statistics.median(xs):.2f}{unit} ({min(xs):.2f}–{max(xs):.2f})"


def updates(pid):
    out = subprocess.run([f"{BIN}/examples/subscription_cost", str(pid), "40", "250"],
                         capture_output=True, text=True, check=True).stdout.splitlines()[1:]
    rows = [line.split() for line in out]
    full = [r for r in rows if r[0] == "1"]
    rest = [r for r in rows if r[0] == "0"]
    # An update on which the runtime was listed took the agent far longer than the others.
    cutoff = 10 * statistics.median(float(r[4]) for r in rest)
    listing = [r for r in rest if float(r[4]) > max(cutoff, 5)]
    deltas = [r for r in rest if r not in listing]
    col = lambda rs, i, f=float: [f(r[i]) for r in rs]
    print("| update | n | tasks carried | KB on the wire | agent ms | inspector ms |")
    print("|---|---|---|---|---|---|")
    for name, rs in [("full state", full), ("changes only", deltas), ("changes + runtime listing", listing)]:
        print(f"| {name} | {len(rs)} | {fmt(col(rs, 2))} | {fmt([b / 1024 for b in col(rs, 3)])} "
              f"| {fmt(col(rs, 4))} | {fmt(col(rs, 5))} |")


def screen():
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", SESSION],
                          capture_output=True, text=True).stdout


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def key_latency(keys):
    times = []
    for key in keys:
        before = screen()
        t = time.perf_counter()
        subprocess.run(["tmux", "send-keys", "-t", SESSION, key], check=True)
        while screen() == before and time.perf_counter() - t < 2:
            time.sleep(0.002)
        times.append((time.perf_counter() - t) * 1e3)
        time.sleep(0.3)
    return times


def watch(pid):
    subprocess.run(["tmux", "kill-session", "-t", SESSION], stderr=subprocess.DEVNULL)
    subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, "-x", "160", "-y", "45",
                    f"{BIN}/asyncdump watch {pid}"], check=True)
    try:
        for _ in range(300):
            if "tasks:" in screen():
                break
            time.sleep(0.1)
        watch_pid = int(subprocess.run(["pgrep", "-f", f"^{BIN}/asyncdump watch {pid}"],
                                       capture_output=True, text=True, check=True).stdout.split()[0])
        time.sleep(5)
        hz = os.sysconf("SC_CLK_TCK")
        a, t = cpu_ticks(watch_pid), time.perf_counter()
        time.sleep(20)
        cpu = (cpu_ticks(watch_pid) - a) / hz / (time.perf_counter() - t) * 100
        status = screen().strip().splitlines()[-1]
        rate = [w for w in status.split("·") if "updates/s" in w]
        print(f"\n`asyncdump watch` CPU: {cpu:.0f}% of one core; status bar: {rate[0].strip() if rate else '?'}")
        sort = key_latency(["o"] * 12)
        subprocess.run(["tmux", "send-keys", "-t", SESSION, "/"], check=True)
        time.sleep(0.3)
        search = key_latency(list("heldheldheld"))
        print(f"key to redraw, ms: sort {statistics.median(sort):.0f} (max {max(sort):.0f}), "
              f"search letter {statistics.median(search):.0f} (max {max(search):.0f})")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], stderr=subprocess.DEVNULL)


def main():
    fx = subprocess.Popen([f"{BIN}/mass", "--tasks", str(TASKS), "--changing", "100"],
                          stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "ASYNCDUMP_FIXTURE_TIMEOUT": "600"})
    try:
        assert fx.stdout.readline().strip() == "ready"
        updates(fx.pid)
        watch(fx.pid)
    finally:
        fx.kill()
        fx.wait()


if __name__ == "__main__":
    main()
