#!/usr/bin/env python3
"""The poll path in deterministic instruction counts: `examples/hotpath` under callgrind, per operation
(one depth-10 chain suspending on a oneshot and resuming, polled by hand), for plain futures, the task
root only, and a frame on every fn; with the size of a framed future per level (`examples/sizes`).

Usage: bench/hotpath.py   (after `cargo build --release -p asyncdump-agent --example hotpath --example sizes`)
Prints Markdown.
"""
import re
import subprocess

EXAMPLES = "target/release/examples"
N = 20_000


def instructions(n, variant):
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"{EXAMPLES}/hotpath", str(n), variant],
        capture_output=True, text=True, check=True,
    ).stderr
    return int(re.search(r"Collected : (\d+)", out).group(1))


# The difference between N operations and none leaves out start-up.
per_op = {v: (instructions(N, v) - instructions(0, v)) / N for v in ("plain", "task", "frames")}
print("| variant | instructions per operation | × plain |")
print("|---|---:|---:|")
for v, label in (("plain", "plain"), ("task", "asyncdump-task"), ("frames", "asyncdump-frames")):
    print(f"| {label} | {per_op[v]:,.0f} | {per_op[v] / per_op['plain']:.2f}× |")
sizes = subprocess.run([f"{EXAMPLES}/sizes"], capture_output=True, text=True, check=True).stdout.split("\n")
print(f"\nFuture sizes in bytes, one to three levels (`examples/sizes`): {sizes[0]}; {sizes[1]}.")
