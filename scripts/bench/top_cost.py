"""Section 17 of BENCHMARKS.md: the own CPU and memory of `fgbpf top`,
whole host at 99 Hz, two copies of the split workload busy: in a terminal
(tmux, 80x24, as over ssh), with stdout piped (one table a second), and
beside them `fgbpf wall` (the same recording, named once at its end) and
`perf top -g` in the same terminal, the peer people reach for. Rounds
interleave the four. CPU is the process's user + system time from
/usr/bin/time over its run, as a share of the machine (all CPUs)."""

import os
import shlex
import subprocess
import time
from pathlib import Path

from measures import log

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
SECONDS = 20


def timed_in(cmd, out_file, tmux=None):
    """Runs `cmd` under /usr/bin/time (in a tmux session when `tmux` names
    one) for SECONDS; returns (elapsed, cpu seconds, max RSS in MB)."""
    timing = ["/usr/bin/time", "-o", str(out_file), "-f", "%e %U %S %M"]
    if tmux:
        line = shlex.join(timing + cmd)
        subprocess.run(["tmux", "-L", tmux, "new-session", "-d", "-s", tmux, "-x", "80", "-y", "24", line], check=True)
        deadline = time.monotonic() + SECONDS + 30
        while time.monotonic() < deadline and not (out_file.exists() and out_file.read_text().strip()):
            time.sleep(0.5)
        subprocess.run(["tmux", "-L", tmux, "kill-server"], stderr=subprocess.DEVNULL)
    else:
        subprocess.run(timing + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elapsed, user, sys_, rss = out_file.read_text().split()[-4:]
    return float(elapsed), float(user) + float(sys_), int(rss) / 1024


def measure(rounds, tmp, workload):
    cpus = os.cpu_count() or 1
    d = str(SECONDS)
    configs = [
        ("fgbpf top, in a terminal", [str(FGBPF), "top", "-d", d], "tui"),
        ("fgbpf top, stdout piped (a table a second)", [str(FGBPF), "top", "-d", d], None),
        ("fgbpf wall (same recording, named once at the end)", [str(FGBPF), "wall", "-q", "-d", d, "-o"], None),
        ("perf top -g, in a terminal", ["timeout", "-s", "INT", d, "perf", "top", "-F", "99", "-g"], "tui"),
    ]
    busy = [subprocess.Popen([workload, str(rounds * len(configs) * (SECONDS + 15))]) for _ in range(2)]
    results = {name: [] for name, _, _ in configs}
    try:
        for r in range(rounds):
            for i, (name, cmd, tui) in enumerate(configs):
                cmd = list(cmd)
                if cmd[-1] == "-o":
                    cmd.append(str(tmp / f"top-cost-wall-{r}"))
                out = tmp / f"top-cost-{r}-{i}.time"
                elapsed, cpu, rss = timed_in(cmd, out, tmux=f"fgbpf-bench-{r}-{i}" if tui else None)
                share = cpu * 100 / (elapsed * cpus)
                results[name].append((share, cpu, rss))
                log(f"top cost round {r}: {name}: {share:.2f}% of the machine, {rss:.0f} MB")
    finally:
        for b in busy:
            b.kill()
            b.wait()
    return cpus, results


def report(measured):
    cpus, results = measured
    L = ["## 17. `fgbpf top`: own cost", "",
         f"Whole host at 99 Hz, {SECONDS} s each, two copies of the split workload busy on {cpus} CPUs; "
         "median of the rounds, range in brackets. CPU is the tool's user + system time over its run, "
         "as a share of the whole machine; memory its peak RSS.", "",
         "| tool | own CPU, % of the machine | peak memory |", "|---|---|---|"]
    for name, runs in results.items():
        shares = sorted(s for s, _, _ in runs)
        rss = sorted(m for _, _, m in runs)
        med = shares[len(shares) // 2]
        L.append(f"| {name} | {med:.2f}% ({shares[0]:.2f}–{shares[-1]:.2f}) | {rss[len(rss) // 2]:.0f} MB |")
    L.append("")
    return L
