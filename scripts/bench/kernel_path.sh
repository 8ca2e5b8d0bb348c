#!/usr/bin/env bash
# Runs inside a kernel-matrix guest (scripts/kernel-matrix.sh --run=THIS):
# the BPF time per on-CPU sample of the path this kernel takes, read from
# the kernel's own account (kernel.bpf_stats_enabled: each program's
# run_time_ns and run_cnt; a tail-called walker's time counts in the
# program that started the chain). Writes $1/kernel-path.json.
# Workload: tests/workloads/plain.c's 10-deep chain, built with gcc -O2,
# 10 s at 999 Hz, the capture's summary kept beside.
set -euo pipefail
out=$1
cd "$REPO"
sysctl -qw kernel.bpf_stats_enabled=1
gcc -O2 -pthread -o /tmp/kp-plain tests/workloads/plain.c
/tmp/kp-plain deep 60 &
work=$!
"$FGBPF" oncpu -F 999 -p "$work" -d 10 -o /tmp/kp-capture 2>"$out/kernel-path.stderr" &
capture=$!
# The programs' account near the end of the capture, while they are
# attached (detached programs are gone from the list).
sleep 9
bpftool prog show -j >"$out/kernel-path-progs.json" || true
wait "$capture"
kill "$work" 2>/dev/null || true
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
progs = json.load(open(f"{out}/kernel-path-progs.json"))
ours = [p for p in progs if p.get("name", "").startswith(("do_sample", "walk_sample"))]
entry = [p for p in ours if p["name"].startswith("do_sample")]
runs = sum(p.get("run_cnt", 0) for p in entry)
ns = sum(p.get("run_time_ns", 0) for p in ours)
said = open(f"{out}/kernel-path.stderr").read()
unwound = next((l.split("unwound: ", 1)[1] for l in said.splitlines() if "user stacks unwound:" in l), "")
json.dump({"programs": sorted(p["name"] for p in ours), "samples": runs, "run_time_ns": ns,
           "ns_per_sample": ns / runs if runs else None, "unwound": unwound},
          open(f"{out}/kernel-path.json", "w"))
PY
