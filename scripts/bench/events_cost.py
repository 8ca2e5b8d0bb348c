#!/usr/bin/env python3
"""The cost of `fgbpf events` per hit: a gcc -O2 program calling a
noinline function N times (tests/workloads/calls.c), timed from its start
line to its done line with no probe, under `fgbpf events -e u:BIN:target`
and under bpftrace counting the same uprobe; and the BPF run time of
fgbpf's program per hit (kernel.bpf_stats_enabled, `bpftool prog show`).
The difference of wall times over N is what a call pays: the breakpoint
trap plus the program. Run as root from the repository:
    python3 scripts/bench/events_cost.py [--fgbpf target/debug/fgbpf] [--calls 2000000]
"""

import argparse
import json
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build(tmp):
    out = tmp / "calls"
    subprocess.run(["gcc", "-O2", "-o", out, ROOT / "tests/workloads/calls.c"], check=True)
    return out


def timed_run(binary, calls, attach=None):
    """Seconds between telling the program to go and its done line, with
    `attach(pid)` (a tracer, started and given time to attach) around."""
    p = subprocess.Popen([binary, str(calls), "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().startswith("ready")
    tracer = attach(p.pid) if attach else None
    start = time.perf_counter()
    p.stdin.write("g")
    p.stdin.flush()
    assert p.stdout.readline().startswith("done")
    took = time.perf_counter() - start
    stats = None
    if tracer:
        stats = prog_stats()
        tracer.send_signal(2)
        tracer.wait(timeout=60)
    p.stdin.close()
    p.wait()
    return took, stats


def prog_stats():
    """run_time_ns and run_cnt of fgbpf's uprobe program, if loaded."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True).stdout
    for prog in json.loads(out or "[]"):
        if prog.get("name") == "event_uprobe" and prog.get("run_cnt"):
            return prog["run_time_ns"], prog["run_cnt"]
    return None


def measure(rounds, tmp, fgbpf_path, calls):
    """{row: (ns per call of each round, BPF ns per hit of each round)},
    rows "no probe", "fgbpf events (stacks)" and, when installed,
    "bpftrace count()"."""
    binary = build(tmp)

    def fgbpf(pid):
        p = subprocess.Popen([fgbpf_path, "events", "-e", f"u:{binary}:target", "-p", str(pid),
                              "-d", "600", "--format", "folded", "-o", str(tmp / f"out-{pid}")],
                             stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if "attached in" in line:
                break
        threading.Thread(target=p.stderr.read, daemon=True).start()
        return p

    def bpftrace(pid):
        p = subprocess.Popen(["bpftrace", "-e", f"uprobe:{binary}:target /pid == {pid}/ {{ @ = count(); }}"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        p.stdout.readline()
        time.sleep(1.0)
        return p

    rows = [("no probe", None), ("fgbpf events (stacks)", fgbpf)]
    if shutil.which("bpftrace"):
        rows.append(("bpftrace count()", bpftrace))
    out = {}
    for r in range(rounds):
        for name, attach in rows:
            took, stats = timed_run(binary, calls, attach)
            times, bpf = out.setdefault(name, ([], []))
            times.append(took * 1e9 / calls)
            if stats:
                bpf.append(stats[0] / stats[1])
            print(f"bench: events round {r + 1}/{rounds}: {name}: {took * 1e9 / calls:.0f} ns a call", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fgbpf", default=str(ROOT / "target/debug/fgbpf"))
    ap.add_argument("--calls", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        with tempfile.TemporaryDirectory() as t:
            rows = measure(args.rounds, Path(t), args.fgbpf, args.calls)
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"], check=False)
    base = min(rows["no probe"][0])
    for name, (times, bpf) in rows.items():
        line = f"{name:28s} {min(times):8.1f} ns per call"
        if name != "no probe":
            line += f"  (+{min(times) - base:.1f} ns per hit)"
        if bpf:
            line += f"; BPF program {bpf[-1]:.0f} ns per hit"
        print(line, flush=True)


if __name__ == "__main__":
    main()
