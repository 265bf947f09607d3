#!/usr/bin/env python3
"""What `init()` alone costs plain tokio tasks: criterion's medians from one
`cargo bench -p asyncdump-agent --bench init_alone` run (no agent, then init() and the runtime registered,
in one process), and deterministic instruction counts of `examples/init_alone` under callgrind.

Usage: bench/init_alone.py [CRITERION_DIR]   (after `cargo build --release -p asyncdump-agent --example init_alone`)
Prints Markdown.
"""
import json
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
EXAMPLE = "target/release/examples/init_alone"
N = 20_000


def median(group, which):
    e = json.loads((root / group / which / "1" / "new" / "estimates.json").read_text())
    return e["median"]["point_estimate"], e["median_abs_dev"]["point_estimate"]


def instructions(n, mode):
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", EXAMPLE, str(n), mode],
        capture_output=True, text=True, check=True,
    ).stderr
    return int(re.search(r"Collected : (\d+)", out).group(1))


print("| workload | no agent ns/op (± MAD) | `init()`, runtime registered ns/op (± MAD) | ratio |")
print("|---|---:|---:|---:|")
for group in ["SpawnYield", "PingPong"]:
    (a, da), (b, db) = median(group, "no-agent"), median(group, "init-registered")
    print(f"| {group} | {a:.0f} (± {da:.0f}) | {b:.0f} (± {db:.0f}) | {b / a:.3f}× |")
print()
per_op = {}
for mode in ["no-agent", "init"]:
    # The difference between N operations and none leaves out start-up (the agent's thread and socket).
    per_op[mode] = (instructions(N, mode) - instructions(0, mode)) / N
print(f"Instructions per operation (one spawn-and-yield plus one channel round trip, callgrind, "
      f"{N:,} operations minus none): no agent {per_op['no-agent']:,.1f}, with `init()` "
      f"{per_op['init']:,.1f} ({per_op['init'] / per_op['no-agent']:.4f}×).")
