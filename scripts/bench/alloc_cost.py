#!/usr/bin/env python3
"""Section 23: what probing the allocator costs a program, and what
`fgbpf events` costs per hit, each beside its peer in the same run.

- `fgbpf alloc`: a gcc -O2 loop of malloc(64)/free pairs
  (scripts/bench/mallocs.c) timed from a byte on stdin to its done line:
  with no probe, under `fgbpf alloc -p` at the default mean (512 KiB) and
  at `--sample-bytes 1` (every call sampled), and under heaptrack
  (LD_PRELOAD, no trap), the peer the tests compare shares with. BPF run
  time per program from `kernel.bpf_stats_enabled`.
- `fgbpf events`: tests/workloads/calls.c's target() called N times,
  under `fgbpf events -e u:BIN:target` and under bpftrace counting the
  same uprobe (scripts/bench/events_cost.py).

Run through `scripts/bench.sh --only alloc`.
"""

import json
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path

import events_cost

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
PAIRS = 200_000
CALLS = 2_000_000


def build(tmp):
    out = tmp / "mallocs"
    subprocess.run(["gcc", "-O2", "-o", out, Path(__file__).with_name("mallocs.c")], check=True)
    return out


def prog_stats(names):
    """{name: (run_time_ns, run_cnt)} of fgbpf's programs loaded now."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True).stdout
    found = {}
    for prog in json.loads(out or "[]"):
        if prog.get("name") in names and prog.get("run_cnt"):
            found[prog["name"]] = (prog["run_time_ns"], prog["run_cnt"])
    return found


def until(p, word):
    """Reads `p`'s lines up to the one saying `word` (heaptrack prints its
    own lines first)."""
    for _ in range(50):
        line = p.stdout.readline()
        if line.startswith(word):
            return
        assert line, f"{p.args} ended before saying {word}"
    raise AssertionError(f"{p.args} never said {word}")


def timed(argv, attach=None, env=None):
    """Seconds of the loop, with `attach(pid)` (a tracer, given time to
    attach) around; and the BPF programs' counts before it is stopped."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    until(p, "ready")
    tracer = attach(p.pid) if attach else None
    start = time.perf_counter()
    p.stdin.write("g")
    p.stdin.flush()
    until(p, "done")
    took = time.perf_counter() - start
    stats = prog_stats({"alloc_entry", "alloc_return", "alloc_free_entry"}) if tracer else {}
    p.stdin.write("e")
    p.stdin.close()
    p.wait()
    if tracer:
        tracer.send_signal(2)
        tracer.wait(timeout=120)
    return took, stats


def fgbpf_alloc(tmp, *extra):
    def attach(pid):
        out = tmp / f"alloc-{pid}"
        p = subprocess.Popen([str(FGBPF), "alloc", "--force", *extra, "-p", str(pid), "-d", "600", "--format", "folded",
                              "-o", str(out)], stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if "attached in" in line:
                break
        threading.Thread(target=p.stderr.read, daemon=True).start()
        return p
    return attach


def measure(rounds, tmp):
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        binary = build(tmp)
        rows = {}
        configs = [("no probe", [str(binary), str(PAIRS)], None, None),
                   ("fgbpf alloc (default 512 KiB)", [str(binary), str(PAIRS)], fgbpf_alloc(tmp), None),
                   ("fgbpf alloc --sample-bytes 1", [str(binary), str(PAIRS)], fgbpf_alloc(tmp, "--sample-bytes", "1"), None)]
        heaptrack = shutil.which("heaptrack")
        if heaptrack:
            configs.append(("heaptrack (LD_PRELOAD)", [heaptrack, "-o", str(tmp / "ht"), str(binary), str(PAIRS)], None, None))
        for r in range(rounds):
            for name, argv, attach, env in configs:
                took, stats = timed(argv, attach, env)
                rows.setdefault(name, []).append((took, stats))
                print(f"bench: alloc round {r + 1}/{rounds}: {name}: {took * 1e9 / PAIRS:.0f} ns a pair", flush=True)
        events = events_cost.measure(rounds, tmp, str(FGBPF), CALLS)
        return rows, events
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"], check=False)


def report(measured):
    rows, events = measured
    med = statistics.median
    L = ["## 23. Allocations and events: cost per call\n",
         f"A gcc -O2 loop of {PAIRS:,} malloc(64)/free pairs (scripts/bench/mallocs.c, called through pointers) timed from "
         "a byte on stdin to its done line, the tracer attached before; median of the rounds. An uprobe traps on every call, "
         "sampled or not: sampling saves the stack walks, not the traps. heaptrack preloads its library (no trap) and writes "
         "every call to its file. The BPF columns are the kernel's run time per run of each program "
         "(`kernel.bpf_stats_enabled`). `scripts/bench.sh --only alloc`.\n",
         "| | per malloc + free pair | added | BPF at entry | at return | at free |", "|---|---|---|---|---|---|"]
    base = med([t for t, _ in rows["no probe"]]) * 1e9 / PAIRS
    for name, runs in rows.items():
        ns = med([t for t, _ in runs]) * 1e9 / PAIRS
        per = []
        for prog in ("alloc_entry", "alloc_return", "alloc_free_entry"):
            vals = [s[prog][0] / s[prog][1] for _, s in runs if prog in s]
            per.append(f"{med(vals):.0f} ns" if vals else "")
        added = "" if name == "no probe" else f"+{ns - base:,.0f} ns"
        L.append(f"| {name} | {ns:,.0f} ns | {added} | {' | '.join(per)} |")
    L += ["", f"`fgbpf events -e u:BIN:target` on tests/workloads/calls.c's target(), called {CALLS:,} times, beside "
          "bpftrace counting the same uprobe (`uprobe:BIN:target /pid == PID/ { @ = count(); }`), one at a time; "
          "median of the rounds (scripts/bench/events_cost.py).\n",
          "| | per call | added per hit | BPF per hit |", "|---|---|---|---|"]
    base = med(events["no probe"][0])
    for name, (times, bpf) in events.items():
        added = "" if name == "no probe" else f"+{med(times) - base:,.0f} ns"
        b = f"{med(bpf):.0f} ns" if bpf else ""
        L.append(f"| {name} | {med(times):,.0f} ns | {added} | {b} |")
    L.append("")
    return L
