#!/usr/bin/env bash
# Fuzzes the folded-file reader and the command-line parser with cargo-fuzz
# for a bounded time each (default 60 s). Inputs that crash are left in
# fuzz/artifacts/; add each one as a regular test (tests/fuzz_cases.rs).
# cargo-fuzz needs nightly compiler features; RUSTC_BOOTSTRAP lets the
# installed stable toolchain provide them.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
cd fuzz
for target in folded cli; do
    echo "fuzz: $target for ${seconds} s" >&2
    RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" -- -max_total_time="$seconds" -max_len=4096
done
