#!/usr/bin/env bash
# One command for the figures of BENCHMARKS.md's current table, on this machine, in one run:
#   bash bench/run.sh
# 1. poll-path overhead, side by side with plain tokio, async-backtrace and await-tree (criterion, ~7 min),
#    and the same path in instructions (callgrind, ~1 min);
# 2. the same scenarios with console-subscriber, which needs tokio built with --cfg tokio_unstable, so it is
#    a separate package (bench/console) with its own target directory (~2 min to build, ~2 min to run);
# 3. what init() alone costs plain tokio tasks (criterion and callgrind, ~1 min);
# 4. snapshot cost with 10,000 and 100,000 suspended tasks, annotated and decoded, with the inspector's
#    peak memory (GNU time) and the poll delay the host sees, and of the axum fixture with 1,000 hanging
#    requests (release builds, ~3 min);
# 5. the live view with 100,000 tasks: what each update costs the agent and the inspector, and `watch`'s
#    CPU and key-to-redraw time in tmux (~1 min);
# 6. a soak: a million tasks spawned and completed under a watch subscription and repeated dumps, with
#    the host's memory over time (~2 min);
# 7. the census that finds unregistered runtimes: its throughput over a 200 MB heap, and 100,000 tasks
#    over one runtime against 16 (~3 min);
# 8. what remembering 100,000 tasks' ages costs a listing (criterion, ~30 s);
# 9. the agent, the process's memory from outside, and the same with every thread held, side by side,
#    with a core of 100,000 tasks (needs gdb's gcore; ~3 min).
# Prints the tables (Markdown): kept as bench/history/DATE.md, the current table updated from them.
# Nothing else should run on the machine meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p asyncdump-agent --bench overhead >&2
echo "## Poll-path overhead"
python3 bench/report.py target/criterion
cargo build --release -q -p asyncdump-agent --example hotpath --example sizes
echo
echo "## The poll path in instructions"
python3 bench/hotpath.py
(cd bench/console && RUSTFLAGS="--cfg tokio_unstable --cfg asyncdump_bench_console" cargo bench --bench overhead >&2)
echo
echo "## console-subscriber (tokio_unstable build)"
python3 bench/report.py bench/console/target/criterion
cargo bench -p asyncdump-agent --bench init_alone >&2
cargo build --release -q -p asyncdump-agent --example init_alone
echo
echo "## init() alone"
python3 bench/init_alone.py target/criterion
cargo build --release -q -p asyncdump -p asyncdump-fixtures
cargo build -q -p asyncdump-fixtures --bin axum_service
echo
echo "## Snapshot cost"
python3 bench/snapshot.py
echo
echo "## A real service: axum with 1,000 hanging requests"
python3 bench/axum_connections.py
cargo build --release -q -p asyncdump --example subscription_cost
echo
echo "## The live view with 100,000 tasks"
python3 bench/watch_mass.py
echo
echo "## Soak: a million tasks come and go"
python3 bench/soak.py
echo
echo "## The census"
python3 bench/census.py
cargo bench -p asyncdump-agent --bench ages >&2
echo
echo "## Ages of 100,000 listed tasks"
python3 - <<'PY'
import json
for case in ("all unchanged", "all new"):
    with open(f"target/criterion/ages_100k tasks, {case}/new/estimates.json") as f:
        median = json.load(f)["median"]["point_estimate"] / 1e6
    print(f"| {case} | {median:.1f} ms |")
PY
echo
echo "## Three ways of reading a process"
python3 bench/agentless.py
