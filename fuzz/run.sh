#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) under a memory limit: `fuzz/run.sh [SECONDS]`.
# Built with libFuzzer's coverage instrumentation through stable rustc's own `-C` flags (what
# cargo-fuzz passes, without the sanitizer), so that no nightly toolchain and no cargo-fuzz are
# needed: CI runs it too. A crash, a leak of the memory limit or an allocation past it stops the run
# and leaves its input under fuzz/artifacts/TARGET/. The corpus each target grows is kept under
# fuzz/corpus/TARGET/ (not in git), seeded there from fuzz/seeds/TARGET/ where present: for `core` and
# `elf_dwarf`, a tiny static program built from fuzz/seeds/tiny.c with `gcc -g -nostdlib -static`
# (as is, and with its DWARF compressed by `objcopy --compress-debug-sections=zlib`) and a core of it
# written by gcore.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
targets="${FUZZ_TARGETS:-frame handshake request reply walk_plan plan_validate file core elf_dwarf}"
flags=(--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table
    -Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks)
# An explicit target, so that the flags reach the targets' code and not build scripts or proc macros.
host=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="${flags[*]}" cargo build --release --locked --bins --target "$host" --target-dir ../target/fuzz -q
for target in $targets; do
    echo "== $target: ${seconds}s"
    mkdir -p "corpus/$target" "artifacts/$target"
    [ -d "seeds/$target" ] && cp -n "seeds/$target"/* "corpus/$target/" 2>/dev/null || true
    status=0
    "../target/fuzz/$host/release/$target" "corpus/$target" -max_total_time="$seconds" \
        -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=262144 \
        -artifact_prefix="artifacts/$target/" -print_final_stats=1 2>"artifacts/$target.log" || status=$?
    grep -E '^stat::number_of_executed_units|^Done|ERROR|panicked' "artifacts/$target.log" || true
    rm -f "/dev/shm/asyncdump-fuzz-"*
    if [ "$status" -ne 0 ] || [ -n "$(ls -A "artifacts/$target" 2>/dev/null)" ]; then
        tail -n 40 "artifacts/$target.log" >&2
        echo "$target: failed; crash inputs in fuzz/artifacts/$target" >&2
        exit 1
    fi
    rm -f "artifacts/$target.log"
done
