#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60): `fuzz/run.sh [SECONDS]`.
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). A crash stops the run and
# leaves its input under fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
for target in frame handshake request reply walk_plan plan_validate file; do
    echo "== $target: ${seconds}s"
    cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -rss_limit_mb=1024 \
        -malloc_limit_mb=256 2>&1 | grep -E '^(Done|#[0-9]+.*DONE)|ERROR|panicked' || true
    if [ -n "$(ls -A "artifacts/$target" 2>/dev/null)" ]; then
        echo "$target: crash inputs in fuzz/artifacts/$target" >&2
        exit 1
    fi
done
