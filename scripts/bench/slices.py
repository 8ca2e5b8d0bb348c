"""Section 12 of BENCHMARKS.md: what time slices cost. The same captures
with fgbpf before slices (a build of the commit before them, passed as
--before) and with them, interleaved in one run: BPF run time per on-CPU
sample at 999 Hz over a busy system, BPF run time per context switch of
the off-CPU tracer over a ping-pong, and seconds from the end of a
5-second capture to its outputs."""

import subprocess
import tempfile
import time
from pathlib import Path
from statistics import median

from measures import log, sampler_run, timed
from sections import ROOT, replace_section


def _per_run(cmd, prog_type, seconds):
    """BPF ns per run of the programs of `prog_type` while `cmd` captures."""
    res = sampler_run(cmd, seconds, prog_type)
    return res["bpf_ns"] / res["runs"] if res["runs"] else None


def measure(w, before, after, rounds, tmp):
    builds = [("before slices", before), ("with slices", after)]
    rows = {name: {"sample_ns": [], "switch_ns": [], "answer_s": []} for name, _ in builds}
    busy = subprocess.Popen([w["cpuburn"], "100000"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        for r in range(rounds):
            for name, binary in builds:
                out = tmp / "slices-cost"
                subprocess.run(["rm", "-rf", str(out)])
                ns = _per_run([str(binary), "oncpu", "-F", "999", "-o", str(out)], "perf_event", 5)
                rows[name]["sample_ns"].append(ns)
                subprocess.run(["rm", "-rf", str(out)])
                t, _ = timed([str(binary), "oncpu", "-p", str(busy.pid), "-d", "5", "-o", str(out)])
                rows[name]["answer_s"].append(t - 5)
                log(f"slices round {r + 1}/{rounds}: {name}: {ns:.0f} ns per sample, answer {t - 5:.3f} s")
    finally:
        busy.kill()
        busy.wait()
    for r in range(rounds):
        for name, binary in builds:
            out = tmp / "slices-off"
            subprocess.run(["rm", "-rf", str(out)])
            pp = subprocess.Popen([w["pingpong"], "200000"], stdout=subprocess.DEVNULL)
            try:
                ns = _per_run([str(binary), "offcpu", "-o", str(out)], "tracing", 3)
            finally:
                pp.kill()
                pp.wait()
            rows[name]["switch_ns"].append(ns)
            log(f"slices round {r + 1}/{rounds}: {name}: {ns} ns per switch")
    return rows


def _cell(values, unit, scale=1.0, digits=0):
    v = [x * scale for x in values if x is not None]
    if not v:
        return "n/a"
    return f"{median(v):.{digits}f} {unit} ({min(v):.{digits}f}–{max(v):.{digits}f})"


def report(rows, before_commit):
    L = ["## 12. Time slices: cost", "",
         f"`scripts/bench.sh --only-slices`: fgbpf built from commit {before_commit} (the last one before slices) "
         "and fgbpf with slices, interleaved in one run. BPF time per on-CPU sample at 999 Hz over a busy "
         "system, BPF time per sched_switch of `fgbpf offcpu` over the ping-pong of section 2 (both from "
         "`kernel.bpf_stats_enabled`), and seconds from the end of a 5-second capture of a busy process to its "
         "outputs (`-p PID -d 5`).", "",
         "| fgbpf | BPF per sample | BPF per switch (off-CPU) | after the window |",
         "|---|---|---|---|"]
    for name, r in rows.items():
        L.append(f"| {name} | {_cell(r['sample_ns'], 'ns')} | {_cell(r['switch_ns'], 'ns')} | "
                 f"{_cell(r['answer_s'], 's', digits=3)} |")
    return L


def only(before, build, fgbpf):
    """`scripts/bench.sh --only-slices BEFORE`: section 12, this build
    against fgbpf built from commit `before`, replaced in BENCHMARKS.md."""
    with tempfile.TemporaryDirectory(prefix="fgbpf-bench-") as t:
        tmp = Path(t)
        w = build(tmp)
        old = tmp / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(old), before], cwd=ROOT, check=True)
        try:
            subprocess.run(["cargo", "build", "--release", "--locked", "--target-dir", str(ROOT / "target/bench-before")],
                           cwd=old, check=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT)
        rows = measure(w, ROOT / "target/bench-before/release/fgbpf", fgbpf, 3, tmp)
    replace_section("## 12. Time slices", "\n".join(report(rows, before)) + "\n")
