#!/usr/bin/env bash
# Every supported tokio, one at a time, against the `old_tokio` service: a multi-thread runtime that
# `init()` registers, with `select!`, `join!` and a task spawned through the agent, and a
# current-thread runtime running a `LocalSet`, made after `init()`, that only the census can find.
# For each version: a copy of fixtures/old_tokio with tokio pinned to it, built, started, dumped,
# and the dump checked. CI runs the two ends within its budget (1.32 through the `old_tokio` specs,
# 1.54 through every other fixture); this runs the whole range.
# Usage: checks/tokio_matrix.sh [VERSION...]   (default 1.32.1 1.39.3 1.44.2 1.54.1; ~2 min each)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(1.32.1 1.39.3 1.44.2 1.54.1)
cargo build -q -p asyncdump
work="$(mktemp -d /tmp/asyncdump-matrix-XXXXXX)"
fixture_pid=""
cleanup() {
    [ -n "$fixture_pid" ] && kill "$fixture_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
# Every line the dump must have, whatever the version.
expected=(
    "runtime multi_thread: 3 alive, 3 listed"
    "runtime current_thread (found by census): 1 alive, 1 listed"
    "LocalSet (found by census): 1 listed"
    "tokio::select! [decoded]"
    "tokio::join! [decoded]"
    "asyncdump_fixture_old_tokio::on_local_set at src/main.rs:"
)
failed=0
printf '| tokio | result |\n|---|---|\n'
for v in "${versions[@]}"; do
    dir="$work/$v"
    cp -r fixtures/old_tokio "$dir"
    rm -rf "$dir/target"
    sed -i "s|path = \"../../agent\"|path = \"$root/agent\"|" "$dir/Cargo.toml"
    (cd "$dir" && cargo update -q -p tokio --precise "$v" && cargo build -q --target-dir "$root/target/tokio_matrix")
    exe="$root/target/tokio_matrix/debug/asyncdump-fixture-old-tokio"
    out="$work/$v.out"
    ASYNCDUMP_FIXTURE_TIMEOUT=60 "$exe" > "$out" &
    fixture_pid=$!
    for _ in $(seq 100); do grep -q ready "$out" && break; sleep 0.1; done
    dump=""
    # Every task is polled within microseconds of `ready`; a few tries at most.
    for _ in $(seq 20); do
        dump="$("$root/target/debug/asyncdump" dump "$fixture_pid")"
        grep -q "(not started;" <<<"$dump" || break
    done
    kill "$fixture_pid"; wait "$fixture_pid" 2>/dev/null || true; fixture_pid=""
    missing=()
    # The version running is the one pinned: its source paths are in the decoded frames.
    for line in "${expected[@]}" "tokio-$v/src/"; do
        grep -qF -- "$line" <<<"$dump" || missing+=("$line")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        printf '| %s | every task listed, census found both, select!/join! decoded |\n' "$v"
    else
        failed=1
        printf '| %s | MISSING: %s |\n' "$v" "$(IFS=';'; echo "${missing[*]}")"
        printf '%s\n' "$dump" > "$root/target/tokio_matrix/dump-$v.txt"
    fi
done
exit "$failed"
