"""Section 0 of BENCHMARKS.md: fgbpf and its peer attached at the same time.

On this VM the BPF cost of one tool measured alone varies several-fold from
run to run (bpftrace alone: 1.5 to 5.9 µs per sample), because the host
lends the vCPUs out. Two tools attached at once to the same workload see
the same machine at the same moment: the ratio of their per-run BPF times
(the kernel's own count, `kernel.bpf_stats_enabled`) holds still where the
absolute figures do not. Rows:

- on-CPU: `tests/workloads/deep.c` (a 20-deep chain: 25 frames with the C
  start-up), two copies busy on both CPUs, built with frame pointers
  (clang) and as users build it (`gcc -O2`), sampled system-wide at 999 Hz
  by `fgbpf oncpu` and bpftrace `profile:hz:999 { @[kstack, ustack] =
  count(); }` (the kernel's frame-pointer walk);
- off-CPU: two threads ping-ponging through pipes on CPU 0
  (`scripts/bench/pingpong.c`), every switch traced system-wide by
  `fgbpf offcpu` and libbpf-tools `offcputime`.

Two programs on one tracepoint run one after the other, in the order they
were attached, and the second finds the caches the first warmed: measured
on this VM, the one attached first spends about 25% more per switch. Each
round therefore attaches the pair in both orders and takes the geometric
mean of the two ratios (the absolute figures are the means of the two).
"""

import signal
import statistics
import subprocess
import time
from pathlib import Path

from measures import bpf_progs, log

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
SECONDS = 5


def build(tmp):
    src = ROOT / "tests/workloads/deep.c"
    inc = ["-I", str(ROOT / "tests/workloads")]
    fp, o2 = tmp / "deep-fp", tmp / "deep-O2"
    subprocess.run(["clang", "-O2", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", *inc,
                    "-o", str(fp), str(src)], check=True)
    subprocess.run(["gcc", "-O2", *inc, "-o", str(o2), str(src)], check=True)
    pp = tmp / "pingpong-c"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(pp), str(ROOT / "scripts/bench/pingpong.c")], check=True)
    return {"fp": str(fp), "O2": str(o2), "pingpong": str(pp)}


def launch(cmd):
    """Starts `cmd` and returns it with the BPF programs it loaded."""
    before = set(bpf_progs())
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.0)
    return proc, [i for i in bpf_progs() if i not in before]


def stop(proc):
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def both_orders(ours, peer, prog_type, before=None):
    """pair() with ours attached first, then with the peer first (each
    after `before()`, which clears fgbpf's output): (ours' ns per run,
    peer's ns per run, ratio), the times the means of the two orders and
    the ratio the geometric mean of the two orders' ratios."""
    per_run = lambda ns_runs: ns_runs[0] / max(ns_runs[1], 1)
    if before:
        before()
    a1, b1 = pair(ours, peer, prog_type)
    if before:
        before()
    b2, a2 = pair(peer, ours, prog_type)
    o = [per_run(a1), per_run(a2)]
    p = [per_run(b1), per_run(b2)]
    ratio = (o[0] / p[0] * o[1] / p[1]) ** 0.5 if p[0] and p[1] else None
    return statistics.mean(o), statistics.mean(p), ratio, (a1[1], b1[1])


def pair(first, second, prog_type):
    """Both tools attached, the first one first, measured over the same
    SECONDS: (ns, runs) of each one's programs of `prog_type`. Tail-called
    programs count in the program that called them, so runs are those of
    the entry programs."""
    a, ida = launch(first)
    b, idb = launch(second)
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        p0 = bpf_progs()
        time.sleep(SECONDS)
        p1 = bpf_progs()
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])
        stop(a)
        stop(b)

    def per(ids):
        sel = [i for i in ids if p1.get(i, {}).get("type") == prog_type]
        ns = sum(p1[i].get("run_time_ns", 0) - p0.get(i, {}).get("run_time_ns", 0) for i in sel)
        runs = sum(p1[i].get("run_cnt", 0) - p0.get(i, {}).get("run_cnt", 0) for i in sel)
        return ns, runs

    return per(ida), per(idb)


def measure(rounds, tmp):
    w = build(tmp)
    rows = {"fp": [], "O2": [], "off": []}
    for r in range(rounds):
        for build_name in ("fp", "O2"):
            busy = [subprocess.Popen([w[build_name], "1000"], stdout=subprocess.DEVNULL) for _ in range(2)]
            out = tmp / f"conc-{build_name}-{r}"
            subprocess.run(["rm", "-rf", str(out)])
            try:
                ours, peer, ratio, runs = both_orders(
                    [str(FGBPF), "oncpu", "-F", "999", "-o", str(out)],
                    ["bpftrace", "-e", "profile:hz:999 { @[kstack, ustack] = count(); }"],
                    "perf_event", lambda: subprocess.run(["rm", "-rf", str(out)]))
            finally:
                for b in busy:
                    b.kill()
                    b.wait()
            rows[build_name].append({"ours": ours, "peer": peer, "ratio": ratio, "runs": runs,
                                     "whole": whole_share(out / "oncpu.folded")})
            log(f"concurrent round {r + 1}/{rounds}, {build_name}: {rows[build_name][-1]}")
        pp = subprocess.Popen([w["pingpong"], "3000000"], stdout=subprocess.DEVNULL)
        out = tmp / f"conc-off-{r}"
        subprocess.run(["rm", "-rf", str(out)])
        try:
            ours, peer, ratio, runs = both_orders([str(FGBPF), "offcpu", "-o", str(out)], ["offcputime"], "tracing",
                                                  lambda: subprocess.run(["rm", "-rf", str(out)]))
        finally:
            pp.kill()
            pp.wait()
        rows["off"].append({"ours": ours, "peer": peer, "ratio": ratio, "runs": runs})
        log(f"concurrent round {r + 1}/{rounds}, off-CPU: {rows['off'][-1]}")
    return rows


def whole_share(folded):
    """Share of the deep workload's samples whose stack holds main and the
    20th level."""
    total = whole = 0
    try:
        text = Path(folded).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        stack, n = line.rsplit(" ", 1)
        if stack.split(";")[0].startswith("deep-"):
            total += int(n)
            if ";main;" in stack and ";level_20;" in stack:
                whole += int(n)
    return whole * 100.0 / total if total else None


def spread(vals, fmt):
    return f"{fmt(statistics.median(vals))} ({fmt(min(vals))}–{fmt(max(vals))})"


def report(rows):
    us = lambda v: f"{v / 1000:.2f} µs"
    ns = lambda v: f"{v:.0f} ns"
    ratio = lambda v: f"{v:.2f}×"
    L = ["## 0. Side by side: per-sample and per-switch cost, both tools attached at once\n",
         __doc__.split("\n\n", 1)[1].strip() + "\n",
         "Ratio: fgbpf's time over the peer's in the same round, both orders of attachment; the median "
         "of the rounds' ratios, with their range.\n",
         "| workload | fgbpf | peer | ratio | fgbpf's whole stacks |", "|---|---|---|---|---|"]
    names = {
        "fp": ("on-CPU, deep chain built with frame pointers", "bpftrace"),
        "O2": ("on-CPU, deep chain built `gcc -O2` (bpftrace's walk stops at the first frameless frame)", "bpftrace"),
        "off": ("off-CPU, ping-pong (cost per switch)", "offcputime"),
    }
    for key, vals in rows.items():
        if not vals:
            continue
        what, peer = names[key]
        fmt = ns if key == "off" else us
        ratios = [v["ratio"] for v in vals if v.get("ratio")]
        wholes = [v["whole"] for v in vals if v.get("whole") is not None]
        whole = f"{statistics.median(wholes):.1f}%" if wholes else "n/a"
        L.append(f"| {what} | {spread([v['ours'] for v in vals], fmt)} | {peer} {spread([v['peer'] for v in vals], fmt)} "
                 f"| {spread(ratios, ratio)} | {whole} |")
    L.append("")
    return L
