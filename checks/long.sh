#!/usr/bin/env bash
# The checks too long for `cargo test`: fuzzing every decoder, Miri on the protocol, the soak and the
# leak check under valgrind, and the load specs on release builds. Usage: checks/long.sh [FUZZ_SECONDS]
# (default 60 per fuzz target; about 25 minutes in all on a 2-core machine).
# Needs: a nightly toolchain with miri (`rustup component add --toolchain nightly miri rust-src`),
# valgrind and tmux (the fuzz targets build with the stable toolchain).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds="${1:-60}"

echo "== fuzzing, ${fuzz_seconds}s a target"
fuzz/run.sh "$fuzz_seconds"

echo "== Miri: the protocol's framing and decoders"
cargo +nightly miri test -p asyncdump-protocol --lib
PROPTEST_CASES=16 MIRIFLAGS=-Zmiri-disable-isolation \
    cargo +nightly miri test -p asyncdump-protocol --test hostile_bytes

echo "== --stop and watch --stop against a program that churns, 5 minutes"
ASYNCDUMP_STRESS_SECONDS=300 cargo test -p asyncdump --test main -- \
    stopping::stop_and_watch_stop_outlast_a_program_that_churns --exact

echo "== release builds"
cargo build --release -p asyncdump -p asyncdump-fixtures

echo "== load specs on release builds, with figures"
cargo test --release -p asyncdump --test load -- --nocapture

echo "== soak: a million tasks, 100 s"
python3 bench/soak.py 100

echo "== leak check under valgrind, 20 s and 60 s"
python3 bench/leakcheck.py 20 60
