#!/usr/bin/env bash
# Benchmarks fgbpf side by side with perf, bpftrace and libbpf-tools in one
# run on this machine, and rewrites BENCHMARKS.md. Run as root on a quiet
# machine; takes about 15 minutes. Usage: scripts/bench.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=PATH,CARGO_HOME,RUSTUP_HOME "$0" "$@"
fi

scripts/setup.sh
# The peers and the runtimes of sections 14 to 16, from the distribution; inferno's
# and rbspy's CLIs from crates.io.
peers=(linux-perf bpftrace libbpf-tools time openjdk-17-jdk-headless nodejs ruby php-cli)
missing=()
for p in "${peers[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
tools="target/bench-tools"
if [ ! -x "$tools/bin/inferno-flamegraph" ]; then
    cargo install --locked --root "$tools" inferno >/dev/null
fi
# rbspy, the peer of section 16, from crates.io.
if [ ! -x "$tools/bin/rbspy" ]; then
    cargo install --locked --root "$tools" rbspy >/dev/null
fi
scripts/fetch-py-spy.sh
# The runtime versions of section 22: Debian 11's and 13's in roots, Node.js
# and JDKs from npm and PyPI.
scripts/fetch-roots.sh
scripts/fetch-node.sh
scripts/fetch-jdks.sh
# perf and bpftrace read tracepoint formats from tracefs.
if ! mountpoint -q /sys/kernel/tracing; then
    mount -t tracefs nodev /sys/kernel/tracing
fi

exec python3 scripts/bench/bench.py --tools "$tools/bin" "$@"
