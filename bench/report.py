#!/usr/bin/env python3
"""Builds the BENCHMARKS.md table from one `cargo bench -p asyncdump-agent --bench overhead` run.

Reads criterion's estimates (target/criterion/<group>/<variant>/<depth>/new/estimates.json) and the
allocation pass (target/criterion/allocs.json); prints a Markdown table: median ns/op with the median
absolute deviation, heap bytes and allocations per op, and each as a ratio to `plain` in the same group.
"""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
allocs = {(r["group"], r["variant"], r["depth"]): r for r in json.loads((root / "allocs.json").read_text())}
variants = ["plain", "asyncdump-frames", "asyncdump-task", "async-backtrace", "await-tree",
            "plain-spawned", "console-subscriber"]
# console-subscriber instruments spawned tasks: it is compared with the same root spawned without it.
baseline_of = {"console-subscriber": "plain-spawned"}

def estimate(group, variant, depth):
    path = root / group.replace("/", "_") / variant / str(depth) / "new" / "estimates.json"
    if not path.exists():
        return None
    e = json.loads(path.read_text())
    return e["median"]["point_estimate"], e["median_abs_dev"]["point_estimate"]

groups = sorted({(g, d) for (g, _, d) in allocs}, key=lambda k: (k[0].split("/")[0], k[0], k[1]))
print("| scenario | depth | variant | median ns/op (± MAD) | × plain | bytes/op | allocs/op | Δ bytes vs plain |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
for group, depth in groups:
    for v in variants:
        est = estimate(group, v, depth)
        a = allocs.get((group, v, depth))
        if est is None or a is None:
            continue
        b = baseline_of.get(v, "plain")
        base = estimate(group, b, depth)
        base_bytes = allocs[(group, b, depth)]["bytes_per_op"]
        ratio = f"{est[0] / base[0]:.2f}×" if base else "-"
        if b != "plain":
            ratio += f" ({b})"
        delta = a["bytes_per_op"] - base_bytes
        print(f"| {group} | {depth} | {v} | {est[0]:.0f} (± {est[1]:.0f}) | {ratio} | "
              f"{a['bytes_per_op']:.1f} | {a['allocs_per_op']:.2f} | {delta:+.1f} |")
