#!/usr/bin/env bash
# Installs what building fgbpf needs, when missing, and builds the release
# binary. Debian/Ubuntu (apt); run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=PATH,CARGO_HOME,RUSTUP_HOME,CI "$0" "$@"
fi

# clang compiles the BPF programs and the test workloads; libelf and zlib
# archives are linked statically into fgbpf; bpftool regenerates vmlinux.h;
# GNU time measures the workloads of the tests and benchmarks.
packages=(clang libelf-dev zlib1g-dev pkg-config make bpftool time)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
    echo "setup: cargo not found: install a Rust toolchain (1.82 or newer, e.g. with rustup) and re-run" >&2
    exit 1
fi

if [ "${1:-}" != "--deps-only" ]; then
    cargo build --release --locked
fi
