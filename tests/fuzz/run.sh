#!/usr/bin/env bash
# Runs every fuzz target for a bounded time over its committed corpus (tests/fuzz/corpus/T).
# A crash leaves its input in tests/fuzz/artifacts/T/ and fails the run; turn it into a
# regression test before fixing it. Usage: tests/fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]
#
# cargo-fuzz needs -Z flags: on a stable toolchain RUSTC_BOOTSTRAP=1 allows them (no nightly
# needed). cargo-fuzz itself is installed from crates.io when missing.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=($(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^mlx5-fuzz$'))
fi
export RUSTC_BOOTSTRAP=1 CARGO_TERM_COLOR=never
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --version 0.13.2
fi
cargo fuzz build --fuzz-dir . "${targets[@]:0:1}" >/dev/null 2>&1 || true
passed=0
failed=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    echo "--- fuzz $t for ${secs}s"
    if cargo fuzz run --fuzz-dir . "$t" "corpus/$t" -- \
        -max_total_time="$secs" -max_len=4096 -timeout=20 -rss_limit_mb=4096 \
        -print_final_stats=1 >"target/fuzz-$t.log" 2>&1; then
        grep -E '^stat::number_of_executed_units|^Done' "target/fuzz-$t.log" || true
        passed=$((passed + 1))
    else
        tail -40 "target/fuzz-$t.log"
        echo "fuzz $t: FAILED (input in tests/fuzz/artifacts/$t/)"
        failed=$((failed + 1))
    fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
