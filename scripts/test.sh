#!/usr/bin/env bash
# Installs what the build and the tests need, then runs the whole suite.
# The capture tests load real BPF programs and need root.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=PATH,CARGO_HOME,RUSTUP_HOME,CI "$0" "$@"
fi
scripts/setup.sh --deps-only
cargo test --locked "$@"
