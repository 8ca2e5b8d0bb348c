"""Section 11 of BENCHMARKS.md: the cost of Python frames. fgbpf's walker
of CPython's interpreter frames against its native-only walk
(`--no-python`) on the same processes, and py-spy sampling one of them at
the same rate from outside."""

import statistics
import subprocess
import time
from pathlib import Path

from measures import sampler_run

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
PY_SPY = ROOT / "target" / "consumers" / "py-spy" / "py-spy"
PYTHON = "/usr/bin/python3.11"
BUSY = ROOT / "tests/workloads/python/busy.py"
HZ = 999
SECONDS = 5


def busy():
    procs = [subprocess.Popen([PYTHON, str(BUSY), "600"], stdout=subprocess.DEVNULL) for _ in range(2)]
    time.sleep(0.7)
    return procs


def stop(procs):
    for p in procs:
        p.kill()
        p.wait()


def measured(cmd):
    """Runs the sampler `cmd(procs)` for SECONDS over two busy interpreters
    (one per CPU)."""
    procs = busy()
    try:
        return sampler_run(cmd(procs), SECONDS)
    finally:
        stop(procs)


def measure(rounds, tmp):
    configs = [
        ("fgbpf oncpu, Python frames (default)", lambda ps: [str(FGBPF), "oncpu", "-q", "-F", str(HZ), "-o", str(tmp / "py-on")]),
        ("fgbpf oncpu --no-python (native frames only)",
         lambda ps: [str(FGBPF), "oncpu", "-q", "-F", str(HZ), "--no-python", "-o", str(tmp / "py-off")]),
        ("py-spy record --nonblocking (one of the two processes)",
         lambda ps: [str(PY_SPY), "record", "--nonblocking", "-r", str(HZ), "-f", "raw", "-d", "600",
                     "-p", str(ps[0].pid), "-o", str(tmp / "py-spy.txt")]),
    ]
    rows = {name: [] for name, _ in configs}
    for r in range(rounds):
        for name, cmd in configs:
            subprocess.run(["rm", "-rf", str(tmp / "py-on"), str(tmp / "py-off")])
            res = measured(cmd)
            rows[name].append(res)
            print(f"bench: python round {r + 1}/{rounds}: {name}: {res}", flush=True)
    return rows


def report(rows):
    med = lambda vals: statistics.median(vals) if vals else 0
    L = ["## 11. Python stacks: cost per sample\n",
         f"Two Debian `python3.11` processes running `tests/workloads/python/busy.py` (one per CPU), sampled at "
         f"{HZ} Hz for {SECONDS} s. fgbpf samples the whole system, so each of its samples is a Python thread "
         "here; BPF time per sample is the kernel's count (`kernel.bpf_stats_enabled`) over its sampler's runs, "
         "own CPU is the tool's process (draining, naming code objects, writing the outputs at the end is not in "
         "the window). py-spy reads one process from outside at the same rate: its cost is all its own CPU, "
         f"per sample at {HZ} Hz.\n",
         "| sampler | BPF per sample | own CPU per second | cost per sample |", "|---|---|---|---|"]
    for name, vals in rows.items():
        cpu = med([v["cpu_s"] for v in vals]) / SECONDS
        if "py-spy" in name:
            per = cpu / HZ * 1e6
            L.append(f"| {name} | n/a | {cpu * 1000:.0f} ms | {per:.1f} µs |")
            continue
        bpf = med([v["bpf_ns"] / v["runs"] / 1000 for v in vals if v["runs"]])
        runs = med([v["runs"] for v in vals]) / SECONDS
        per = bpf + cpu * 1e6 / max(runs, 1)
        L.append(f"| {name} | {bpf:.2f} µs | {cpu * 1000:.0f} ms | {per:.2f} µs |")
    L.append("")
    return L
