"""Section 16 of BENCHMARKS.md: the cost of Ruby frames. fgbpf's walker of
Ruby's control frames against its native-only walk (`--no-ruby`) on the
same processes, and rbspy (from crates.io, the profiler Ruby users know)
sampling one of them at the same rate from outside."""

import statistics
import subprocess
import time
from pathlib import Path

from measures import sampler_run

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
BUSY = ROOT / "tests/workloads/ruby/busy.rb"
HZ = 999
SECONDS = 5


def busy():
    procs = [subprocess.Popen(["ruby", str(BUSY), "600"], stdout=subprocess.DEVNULL) for _ in range(2)]
    time.sleep(0.7)
    return procs


def stop(procs):
    for p in procs:
        p.kill()
        p.wait()


def measured(cmd):
    """Runs the sampler `cmd(procs)` for SECONDS over two busy Ruby
    processes (one per CPU)."""
    procs = busy()
    try:
        return sampler_run(cmd(procs), SECONDS)
    finally:
        stop(procs)


def measure(rounds, tmp, tools):
    rbspy = Path(tools) / "rbspy"
    configs = [
        ("fgbpf oncpu, Ruby frames (default)", lambda ps: [str(FGBPF), "oncpu", "-q", "-F", str(HZ), "-o", str(tmp / "rb-on")]),
        ("fgbpf oncpu --no-ruby (native frames only)",
         lambda ps: [str(FGBPF), "oncpu", "-q", "-F", str(HZ), "--no-ruby", "-o", str(tmp / "rb-off")]),
        ("rbspy record --nonblocking (one of the two processes)",
         lambda ps: [str(rbspy), "record", "--nonblocking", "--silent", "-r", str(HZ), "-d", "600", "--format",
                     "collapsed", "-p", str(ps[0].pid), "-f", str(tmp / "rbspy.txt")]),
    ]
    rows = {name: [] for name, _ in configs}
    for r in range(rounds):
        for name, cmd in configs:
            subprocess.run(["rm", "-rf", str(tmp / "rb-on"), str(tmp / "rb-off"), str(tmp / "rbspy.txt")])
            res = measured(cmd)
            rows[name].append(res)
            print(f"bench: ruby round {r + 1}/{rounds}: {name}: {res}", flush=True)
    return rows


def report(rows):
    med = lambda vals: statistics.median(vals) if vals else 0
    L = ["## 16. Ruby stacks: cost per sample\n",
         f"Two Debian `ruby` (3.1) processes running `tests/workloads/ruby/busy.rb` (one per CPU), sampled at "
         f"{HZ} Hz for {SECONDS} s. fgbpf samples the whole system, so each of its samples is a Ruby thread "
         "here; BPF time per sample is the kernel's count (`kernel.bpf_stats_enabled`) over its sampler's runs, "
         "own CPU is the tool's process (draining, naming iseqs; writing the outputs at the end is not in the "
         "window). rbspy reads one process from outside at the same rate: its cost is all its own CPU, per "
         f"sample at {HZ} Hz. Median of the rounds.\n",
         "| sampler | BPF per sample | own CPU per second | cost per sample |", "|---|---|---|---|"]
    for name, vals in rows.items():
        cpu = med([v["cpu_s"] for v in vals]) / SECONDS
        if "rbspy" in name:
            per = cpu / HZ * 1e6
            L.append(f"| {name} | n/a | {cpu * 1000:.0f} ms | {per:.1f} µs |")
            continue
        bpf = med([v["bpf_ns"] / v["runs"] / 1000 for v in vals if v["runs"]])
        runs = med([v["runs"] for v in vals]) / SECONDS
        per = bpf + cpu * 1e6 / max(runs, 1)
        L.append(f"| {name} | {bpf:.2f} µs | {cpu * 1000:.0f} ms | {per:.2f} µs |")
    L.append("")
    return L
