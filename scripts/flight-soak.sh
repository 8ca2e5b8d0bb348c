#!/usr/bin/env bash
# Flight-recorder soak (not part of scripts/test.sh): `fgbpf flight` on the
# whole system as its service runs it (defaults: 49 Hz, --keep 10m) for
# MINUTES (default 60) against scripts/soak.sh's churning load
# (scripts/soak/load.c). `fgbpf dump` every 15 minutes and at the end, each
# timed. Every 10 s it records fgbpf's resident and peak memory, CPU and
# BPF map fill; over the run its BPF programs' run time (with
# kernel.bpf_stats_enabled on); at the end each dump's losses and what
# fgbpf said; and
# writes the "## Flight soak" section of BENCHMARKS.md ("## Flight soak,
# churn divided by SLOWER" when SLOWER is given above 1). Run as root:
#   scripts/flight-soak.sh [MINUTES] [SLOWER]
# Nothing else should run meanwhile: whole-host fgbpf reads what every
# process maps (a Rust build maps 150 MB of compiler).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=PATH,CARGO_HOME,RUSTUP_HOME "$0" "$@"
fi
minutes=${1:-60}
case "$minutes" in
    ''|*[!0-9]*|0) echo "flight-soak: MINUTES must be a whole number above 0, not '$minutes'" >&2; exit 2 ;;
esac
# SLOWER: the load's churn divided by it (load.c's SLOWER); 1 is the soak's.
slower=${2:-1}
case "$slower" in
    ''|*[!0-9]*|0) echo "flight-soak: SLOWER must be a whole number above 0, not '$slower'" >&2; exit 2 ;;
esac
scripts/setup.sh
work=$(mktemp -d /tmp/fgbpf-flight-soak.XXXXXX)
load=""
fgbpf=""
cleanup() {
    sysctl -q kernel.bpf_stats_enabled=0 || true
    [ -n "$fgbpf" ] && kill -INT "$fgbpf" 2>/dev/null || true
    [ -n "$load" ] && kill "$load" 2>/dev/null || true
    rm -rf -- "$work"
}
trap cleanup EXIT
gcc -O2 -pthread -o "$work/load" scripts/soak/load.c -ldl
secs=$((minutes * 60))
"$work/load" $((secs + 30)) "$slower" > "$work/load.out" &
load=$!
sleep 2
python3 scripts/soak/soak.py bpf-programs "$work/bpf-before"
start=$(date +%s.%N)
bin=target/release/fgbpf
"$bin" flight --dumps "$work/dumps" 2> "$work/stderr" &
fgbpf=$!
# Its programs' run time, counted by the kernel from when they are loaded.
sleep 2
sysctl -q kernel.bpf_stats_enabled=1
python3 scripts/soak/soak.py bpf-programs "$work/bpf-start"
: > "$work/rows"
: > "$work/dumps.log"
# A dump asked through the socket, timed: "SECONDS_IN TOOK DIR".
ask() {
    local t0 t1 dir
    t0=$(date +%s.%N)
    dir=$("$bin" dump --dumps "$work/dumps" 2>> "$work/dumps.err") || dir="failed"
    t1=$(date +%s.%N)
    echo "$(echo "$t0 - $start" | bc) $(echo "$t1 - $t0" | bc) $dir" >> "$work/dumps.log"
}
# Paced by the clock, not by counting turns (a turn takes more than its
# 10 s of sleep): the load ends 30 s after the last dump.
t_end=$(( $(date +%s) + secs ))
next_dump=$(( $(date +%s) + 900 ))
while [ "$(date +%s)" -lt "$t_end" ]; do
    sleep 10
    kill -0 "$fgbpf" 2>/dev/null || { echo "flight-soak: fgbpf flight stopped:" >&2; cat "$work/stderr" >&2; exit 1; }
    python3 scripts/soak/soak.py sample "$fgbpf" "$start" >> "$work/rows" || true
    tail -n 1 "$work/rows" >&2
    if [ "$(date +%s)" -ge "$next_dump" ] && [ "$(date +%s)" -lt "$t_end" ]; then
        next_dump=$((next_dump + 900))
        ask
        tail -n 1 "$work/dumps.log" >&2
        python3 scripts/soak/soak.py sample "$fgbpf" "$start" >> "$work/rows" || true
    fi
done
ask
end=$(date +%s.%N)
python3 scripts/soak/soak.py bpf-programs "$work/bpf-end"
sysctl -q kernel.bpf_stats_enabled=0
kill -INT "$fgbpf"
wait "$fgbpf" || { echo "flight-soak: fgbpf flight failed:" >&2; cat "$work/stderr" >&2; exit 1; }
fgbpf=""
# The load ends by itself 30 s after the recording, saying what it made.
wait "$load" || true
load=""
python3 scripts/soak/soak.py flight-report "$work" "$minutes" "$(echo "$end - $start" | bc)" "$slower"
