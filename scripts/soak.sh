#!/usr/bin/env bash
# Soak test (not part of scripts/test.sh): `fgbpf wall` on the whole system
# for MINUTES (default 10) against a churning load (scripts/soak/load.c:
# short processes, short threads, execs, dlopen, private mount namespaces).
# Every 10 s it records fgbpf's resident and peak memory, CPU and BPF map
# fill; at the end its losses; and writes the "## Soak" section of
# BENCHMARKS.md. Run as root:  scripts/soak.sh [MINUTES]
# FGBPF_SOAK_BIN=PATH soaks another build of fgbpf (an older commit, for a
# before/after on the same load) into a section of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=PATH,CARGO_HOME,RUSTUP_HOME,FGBPF_SOAK_BIN "$0" "$@"
fi
minutes=${1:-10}
case "$minutes" in
    ''|*[!0-9]*|0) echo "soak: MINUTES must be a whole number above 0, not '$minutes'" >&2; exit 2 ;;
esac
scripts/setup.sh
work=$(mktemp -d /tmp/fgbpf-soak.XXXXXX)
load=""
cleanup() {
    [ -n "$load" ] && kill "$load" 2>/dev/null || true
    rm -rf -- "$work"
}
trap cleanup EXIT
gcc -O2 -pthread -o "$work/load" scripts/soak/load.c -ldl
secs=$((minutes * 60))
"$work/load" $((secs + 15)) > "$work/load.out" &
load=$!
sleep 2
start=$(date +%s.%N)
bin=${FGBPF_SOAK_BIN:-target/release/fgbpf}
FGBPF_MEMORY_STAGES=1 "$bin" wall -d "$secs" -o "$work/capture" --json > "$work/summary.json" 2> "$work/stderr" &
fgbpf=$!
: > "$work/rows"
while sleep 10 && kill -0 "$fgbpf" 2>/dev/null; do
    python3 scripts/soak/soak.py sample "$fgbpf" "$start" >> "$work/rows" || true
    tail -n 1 "$work/rows" >&2
done
if ! wait "$fgbpf"; then
    echo "soak: fgbpf failed:" >&2
    cat "$work/stderr" >&2
    exit 1
fi
wait "$load"
load=""
python3 scripts/soak/soak.py report "$work" "$minutes"
