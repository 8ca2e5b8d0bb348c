"""Section 21: what one context switch costs fgbpf in the kernel, by part,
and what the recorders cost on the soak's churning load, beside libbpf-tools'
offcputime. Every figure is the kernel's own account of the programs
(kernel.bpf_stats_enabled: run time and runs of the sched_switch programs),
so the tracepoint's entry, common to every tracer, is not in them.

Ping-pong (scripts/bench/pingpong.c, two threads on one CPU, ~400,000
switches a run): fgbpf offcpu as it records by default, then with a part
left out (--user-only: no kernel stack; --kernel-only: no user stack walk;
--min-block 1000: no kernel stack and no count, every wait being shorter),
and offcputime. Churn (scripts/soak/load.c at the soak's pace, ~4,300
switches a second of forks, execs and short threads): offcputime, fgbpf
offcpu and fgbpf flight each alone for SECONDS, their BPF run time and
their own CPU as shares of the machine."""

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from measures import attached, delta, log
from sections import ROOT

FGBPF = ROOT / "target" / "release" / "fgbpf"
PING = [
    ("fgbpf offcpu", ["offcpu"]),
    ("fgbpf wall", ["wall"]),
    ("fgbpf offcpu --user-only", ["offcpu", "--user-only"]),
    ("fgbpf offcpu --kernel-only", ["offcpu", "--kernel-only"]),
    ("fgbpf offcpu --min-block 1000", ["offcpu", "--min-block", "1000"]),
    ("offcputime (libbpf-tools)", None),
]
CHURN = [("offcputime (libbpf-tools)", None), ("fgbpf offcpu", ["offcpu"]), ("fgbpf flight", ["flight"])]
SECONDS = 20


def command(args, out):
    if args is None:
        return ["offcputime"]
    if args[0] == "flight":
        return [str(FGBPF), "flight", "--dumps", str(out), "-q"]
    return [str(FGBPF), *args, "-o", str(out), "-q"]


def switch_run(cmd, during):
    """`cmd` attached while `during()` runs: the run time and runs of the
    sched_switch programs it loaded (offcputime's sched_switch, fgbpf's
    switch_*; a tail-called walker's time counts in the program that
    started it), all its programs' run time, its own CPU and the seconds
    measured."""
    run = attached(cmd, during, settle=4)
    switch = [i for i, p in run["ours"].items() if "switch" in p.get("name", "")]
    return {"switch_ns": delta(run, "run_time_ns", switch), "switches": delta(run, "run_cnt", switch),
            "bpf_ns": delta(run, "run_time_ns", run["ours"]), "cpu_s": run["cpu_s"], "secs": run["secs"]}


def measure(rounds, tmp):
    pp, load = tmp / "pingpong", tmp / "load"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(pp), str(ROOT / "scripts/bench/pingpong.c")], check=True)
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(load), str(ROOT / "scripts/soak/load.c"), "-ldl"], check=True)
    ping = {name: [] for name, _ in PING}
    churn = {name: [] for name, _ in CHURN}
    for r in range(rounds):
        for name, args in PING:
            log(f"switch parts: ping-pong, {name}, round {r + 1}")
            with tempfile.TemporaryDirectory(dir=tmp) as out:
                run = lambda: subprocess.run([str(pp), "200000"], stdout=subprocess.DEVNULL, check=True)
                ping[name].append(switch_run(command(args, Path(out) / "o"), run))
        for name, args in CHURN:
            log(f"switch parts: churn, {name}, round {r + 1}")
            with tempfile.TemporaryDirectory(dir=tmp) as out:
                busy = subprocess.Popen([str(load), str(SECONDS + 15), "1"], stdout=subprocess.DEVNULL)
                try:
                    time.sleep(2)
                    churn[name].append(switch_run(command(args, Path(out) / "o"), lambda: time.sleep(SECONDS)))
                finally:
                    busy.kill()
                    busy.wait()
    return {"ping": ping, "churn": churn, "cpus": os.cpu_count()}


def median_of(runs, f):
    return statistics.median(f(r) for r in runs)


def report(m):
    ping, churn, cpus = m["ping"], m["churn"], m["cpus"]
    per = lambda r: r["switch_ns"] / max(r["switches"], 1)
    rounds = len(next(iter(ping.values())))
    peer = median_of(ping["offcputime (libbpf-tools)"], per)
    full = median_of(ping["fgbpf offcpu"], per)
    L = ["## 21. A switch's cost, by part\n",
         "`scripts/bench.sh --only switch-parts`: the kernel's own account of the `sched_switch` programs "
         "(`kernel.bpf_stats_enabled`: run time over runs; the tracepoint's entry, which every tracer pays, is "
         f"not in it), median of {rounds} rounds. Ping-pong: two threads on one CPU (`scripts/bench/pingpong.c`, "
         "~400,000 switches a run), each way of recording attached alone.\n",
         "| recorder | BPF time per switch | against `fgbpf offcpu` | against offcputime |",
         "|---|---|---|---|"]
    for name, _ in PING:
        ns = median_of(ping[name], per)
        L.append(f"| {name} | {ns:.0f} ns ({min(map(per, ping[name])):.0f}–{max(map(per, ping[name])):.0f}) "
                 f"| {ns / full:.2f}× | {ns / peer:.2f}× |")
    kern = full - median_of(ping["fgbpf offcpu --user-only"], per)
    L += ["",
          f"The kernel stack is {kern:.0f} ns of fgbpf's {full:.0f} ({kern / full:.0%}): the kernel's own unwinder "
          "(`bpf_get_task_stack` on the thread switching in; taking it at switch-out with `bpf_get_stack`, as "
          "offcputime does, measured dearer here). The user stack's walk by `.eh_frame` tables and the count are "
          "the rest.\n",
          f"On the soak's churning load (`scripts/soak/load.c`, its pace 1), each recorder alone for {SECONDS} s: "
          f"shares of the {cpus}-CPU machine.\n",
          "| recorder | switches /s | BPF time per switch | its BPF programs | own CPU | in all |",
          "|---|---|---|---|---|---|"]
    for name, _ in CHURN:
        runs = churn[name]
        share = lambda key: median_of(runs, lambda r: r[key] / 1e9 / r["secs"] / cpus * 100 if key == "bpf_ns"
                                      else r[key] / r["secs"] / cpus * 100)
        bpf, own = share("bpf_ns"), share("cpu_s")
        rate = median_of(runs, lambda r: r["switches"] / r["secs"])
        L.append(f"| {name} | {rate:.0f} | {median_of(runs, per):.0f} ns | {bpf:.2f}% | {own:.2f}% | {bpf + own:.2f}% |")
    L.append("")
    return L


if __name__ == "__main__":
    import sys
    with tempfile.TemporaryDirectory(prefix="fgbpf-bench-") as t:
        print("\n".join(report(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1, Path(t)))))
