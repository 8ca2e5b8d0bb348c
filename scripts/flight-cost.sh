#!/usr/bin/env bash
# What whole-host `fgbpf flight` costs as a function of how many processes
# the host makes (not part of scripts/test.sh). For each pace of
# scripts/soak/load.c (idle, then its churning threads' pauses multiplied
# by 30, 10, 3 and 1: the soak's load), one minute of `fgbpf flight` with
# its defaults, measuring its own CPU and its BPF programs' run time
# (kernel.bpf_stats_enabled, on for the runs), then half a minute of
# `perf record -a -g -F 49` (frame pointers, on-CPU only) on the same
# load for comparison. Writes the "## Flight cost by churn" section of
# BENCHMARKS.md. Run as root, nothing else running:
#   scripts/flight-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=PATH,CARGO_HOME,RUSTUP_HOME "$0" "$@"
fi
scripts/setup.sh
command -v perf >/dev/null || { echo "flight-cost: perf is needed (apt-get install linux-perf)" >&2; exit 1; }
work=$(mktemp -d /tmp/fgbpf-flight-cost.XXXXXX)
load=""
pid=""
cleanup() {
    sysctl -q kernel.bpf_stats_enabled=0 || true
    [ -n "$pid" ] && kill -INT "$pid" 2>/dev/null || true
    [ -n "$load" ] && kill "$load" 2>/dev/null || true
    rm -rf -- "$work"
}
trap cleanup EXIT
gcc -O2 -pthread -o "$work/load" scripts/soak/load.c -ldl
bin=target/release/fgbpf
secs=60
perf_secs=30
: > "$work/rows"
for pace in idle 30 10 3 1; do
    load=""
    made="processes 0"
    if [ "$pace" != idle ]; then
        "$work/load" $((secs + perf_secs + 25)) "$pace" > "$work/load.out" &
        load=$!
    fi
    sleep 2
    python3 scripts/soak/soak.py bpf-programs "$work/bpf-before"
    "$bin" flight --dumps "$work/dumps" 2> "$work/stderr" &
    pid=$!
    sleep 8
    kill -0 "$pid" || { echo "flight-cost: fgbpf flight stopped:" >&2; cat "$work/stderr" >&2; exit 1; }
    sysctl -q kernel.bpf_stats_enabled=1
    python3 scripts/soak/soak.py bpf-programs "$work/bpf-start"
    forks0=$(awk '/^processes/ {print $2}' /proc/stat)
    cpu0=$(python3 scripts/soak/soak.py cpu "$pid")
    sleep "$secs"
    cpu1=$(python3 scripts/soak/soak.py cpu "$pid")
    forks1=$(awk '/^processes/ {print $2}' /proc/stat)
    python3 scripts/soak/soak.py bpf-programs "$work/bpf-end"
    sysctl -q kernel.bpf_stats_enabled=0
    kill -INT "$pid"
    wait "$pid" || { echo "flight-cost: fgbpf flight failed:" >&2; cat "$work/stderr" >&2; exit 1; }
    pid=""
    bpf=$(python3 scripts/soak/soak.py bpf-cost "$work")
    # The peer on the same load: its own CPU (user + system, children
    # included) over perf_secs.
    /usr/bin/time -o "$work/perf.time" -f "%U %S" perf record -a -g -F 49 -o "$work/perf.data" -- sleep "$perf_secs" > /dev/null 2> "$work/perf.err"
    perf_cpu=$(awk '{print $1 + $2}' "$work/perf.time")
    rm -f "$work/perf.data"
    if [ -n "$load" ]; then
        wait "$load" || true
        made=$(cat "$work/load.out")
    fi
    load=""
    # pace, clones a second (/proc/stat: processes and threads), what the
    # load made in all, fgbpf's CPU s, its BPF s, perf's CPU s.
    row="$pace $(( (forks1 - forks0) / secs )) $(echo "$cpu1 - $cpu0" | bc) $bpf $perf_cpu $made"
    echo "$row" | tee -a "$work/rows" >&2
done
python3 scripts/soak/soak.py flight-cost "$work" "$secs" "$perf_secs" "$(git describe --always --dirty)"
