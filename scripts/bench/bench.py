#!/usr/bin/env python3
"""Runs fgbpf and its peers side by side on this machine and writes
BENCHMARKS.md. Called by scripts/bench.sh, which installs the peers.

Every figure is a ratio or difference measured in this one run, with
configurations interleaved round by round so that drift on a shared,
noisy machine spreads over all of them."""

import argparse
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import unwinding  # noqa: E402
import python as python_cost  # noqa: E402
import interp_cost  # noqa: E402
import versions_cost  # noqa: E402
import reference_cost  # noqa: E402
import alloc_cost  # noqa: E402
import java_cost  # noqa: E402
import switch_parts  # noqa: E402
import node_cost  # noqa: E402
import top_cost  # noqa: E402
import go_cost  # noqa: E402
import otlp_cost  # noqa: E402
import kernel_paths  # noqa: E402
import slices as slices_cost  # noqa: E402
import side_by_side  # noqa: E402
import wall_sums  # noqa: E402
from sections import in_order, keep_sections, replace_section, wakers_section  # noqa: E402
from measures import bpf_progs, log, own_use, proc_cpu, timed  # noqa: E402
from startup import startup, startup_section  # noqa: E402
FGBPF = ROOT / "target" / "release" / "fgbpf"
CFLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-pthread"]


def build(tmp):
    out = {}
    for name, src in [
        ("cpuburn", ROOT / "scripts/bench/cpuburn.c"),
        ("pingpong", ROOT / "scripts/bench/pingpong.c"),
        ("split", ROOT / "tests/workloads/split.c"),
    ]:
        out[name] = str(tmp / name)
        subprocess.run(["clang", *CFLAGS, "-o", out[name], str(src)], check=True)
    return out


class Background:
    """A profiler running in the background, stopped with SIGINT."""

    def __init__(self, cmd, settle=1.5):
        self.cmd = cmd
        self.proc = None
        self.settle = settle

    def __enter__(self):
        if self.cmd:
            self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(self.settle)
        return self

    def __exit__(self, *exc):
        if self.proc:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def stats(values):
    med = statistics.median(values)
    return med, min(values), max(values)


def fmt_spread(values, unit="s", digits=3):
    med, lo, hi = stats(values)
    return f"{med:.{digits}f} {unit} ({lo:.{digits}f}–{hi:.{digits}f})"


def machine():
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 1024
    tool_versions = []
    for cmd in (["perf", "--version"], ["bpftrace", "--version"]):
        try:
            tool_versions.append(subprocess.run(cmd, capture_output=True, text=True).stdout.strip())
        except OSError:
            pass
    return (
        f"{os.cpu_count()} × {model}, {mem} GiB, Linux {platform.release()}; "
        + "; ".join(tool_versions)
        + "; libbpf-tools offcputime from the distribution"
    )


# --- 1. on-CPU overhead ----------------------------------------------------

def oncpu_overhead(w, rounds, tmp):
    # About 4 s of work per run: long enough that a point of slowdown
    # stands out of the run-to-run spread of a shared VM.
    burn = [w["cpuburn"], "3000"]
    configs = [("alone", None)]
    for hz in (99, 999, 4999):
        configs += [
            (f"fgbpf oncpu -F {hz}", [str(FGBPF), "oncpu", "-F", str(hz), "-o", str(tmp / f"on{hz}")]),
            (f"perf record -g -F {hz}", ["perf", "record", "-a", "-g", "-F", str(hz), "-o", str(tmp / f"perf{hz}.data")]),
            (f"bpftrace profile:hz:{hz} (stacks)", ["bpftrace", "-e", f"profile:hz:{hz} {{ @[kstack, ustack] = count(); }}"]),
            (f"bpftrace profile:hz:{hz} (empty counter)", ["bpftrace", "-e", f"profile:hz:{hz} {{ @c = count(); }}"]),
        ]
    times = {name: [] for name, _ in configs}
    for r in range(rounds):
        for name, cmd in configs:
            if cmd and cmd[0] == str(FGBPF):
                subprocess.run(["rm", "-rf", cmd[-1]])
            with Background(cmd):
                t, _ = timed(burn)
            times[name].append(t)
            log(f"on-CPU round {r + 1}/{rounds}: {name}: {t:.3f} s")
    return times


# --- 1b. on-CPU cost, measured directly -------------------------------------

def sampler_cost(w, rounds, tmp, hz=999, seconds=5):
    """What each sampler adds per second of capture, measured rather than
    inferred from run times: the kernel's own count of the time its BPF
    programs ran (kernel.bpf_stats_enabled) and the tool's process CPU time.
    Both scale with the host's speed like the work they are charged to, so
    unlike a slowdown in wall time they hold still on a noisy shared VM.
    The timer interrupts themselves cost every sampler the same."""
    configs = [
        (f"fgbpf oncpu -F {hz}", [str(FGBPF), "oncpu", "-F", str(hz), "-o", str(tmp / "cost")]),
        (f"bpftrace profile:hz:{hz} (stacks)", ["bpftrace", "-e", f"profile:hz:{hz} {{ @[kstack, ustack] = count(); }}"]),
        (f"bpftrace profile:hz:{hz} (empty counter)", ["bpftrace", "-e", f"profile:hz:{hz} {{ @c = count(); }}"]),
        (f"perf record -g -F {hz}", ["perf", "record", "-a", "-g", "-F", str(hz), "-o", str(tmp / "cost.data")]),
    ]
    busy = subprocess.Popen([w["cpuburn"], "100000"], stdout=subprocess.DEVNULL)
    rows = {name: [] for name, _ in configs}
    try:
        for r in range(rounds):
            for name, cmd in configs:
                subprocess.run(["rm", "-rf", str(tmp / "cost")])
                before = set(bpf_progs())
                with Background(cmd) as bg:
                    ours = [i for i in bpf_progs() if i not in before]
                    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
                    try:
                        p0, c0, t0 = bpf_progs(), proc_cpu(bg.proc.pid), time.monotonic()
                        time.sleep(seconds)
                        p1, c1, t1 = bpf_progs(), proc_cpu(bg.proc.pid), time.monotonic()
                    finally:
                        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])
                delta = lambda key, ids: sum(p1.get(i, {}).get(key, 0) - p0.get(i, {}).get(key, 0) for i in ids)
                samplers = [i for i in ours if p1.get(i, {}).get("type") == "perf_event"]
                runs = delta("run_cnt", samplers)
                bpf_ns = delta("run_time_ns", ours)
                span = t1 - t0
                rows[name].append({
                    "per_sample_us": bpf_ns / runs / 1000 if runs else None,
                    "samples_per_s": runs / span,
                    "bpf_ms_per_s": bpf_ns / 1e6 / span,
                    "process_ms_per_s": (c1 - c0) * 1000 / span,
                })
                log(f"sampler cost round {r + 1}/{rounds}: {name}: {rows[name][-1]}")
    finally:
        busy.kill()
        busy.wait()
    return rows


# --- 2. off-CPU overhead ---------------------------------------------------

def offcpu_overhead(w, rounds, tmp, only=None):
    pp = [w["pingpong"], "200000"]
    configs = [
        ("alone", None),
        ("fgbpf offcpu", [str(FGBPF), "offcpu", "-o", str(tmp / "off-default")]),
        ("fgbpf offcpu --min-block 1000", [str(FGBPF), "offcpu", "--min-block", "1000", "-o", str(tmp / "off-min")]),
        ("fgbpf offcpu --sample 100", [str(FGBPF), "offcpu", "--sample", "100", "-o", str(tmp / "off-sample")]),
        ("fgbpf offcpu --wakers", [str(FGBPF), "offcpu", "--wakers", "-o", str(tmp / "off-wakers")]),
        ("offcputime (libbpf-tools)", ["offcputime"]),
        ("offcputime -m 1000", ["offcputime", "-m", "1000"]),
        ("perf record -e sched:sched_switch -g", ["perf", "record", "-a", "-g", "-e", "sched:sched_switch", "-o", str(tmp / "sw.data")]),
        ("empty counter on sched_switch (bpftrace)", ["bpftrace", "-e", "tracepoint:sched:sched_switch { @c = count(); }"]),
    ]
    if only:
        configs = [c for c in configs if c[0] in only]
    times = {name: [] for name, _ in configs}
    switches = []
    for r in range(rounds):
        for name, cmd in configs:
            if cmd and cmd[0] == str(FGBPF):
                subprocess.run(["rm", "-rf", cmd[-1]])
            with Background(cmd):
                t, out = timed(pp)
            times[name].append(t)
            switches.append(int(out.strip() or 0))
            log(f"off-CPU round {r + 1}/{rounds}: {name}: {t:.3f} s")
    return times, statistics.median(switches)


# --- 3. time to answer -----------------------------------------------------

def time_to_answer(w, rounds, tmp, tools):
    busy = subprocess.Popen([w["cpuburn"], "100000"], stdout=subprocess.DEVNULL)
    pid = str(busy.pid)
    fg, pf = [], []
    try:
        time.sleep(0.5)
        for r in range(rounds):
            d = tmp / f"tta{r}"
            subprocess.run(["rm", "-rf", str(d)])
            t, _ = timed([str(FGBPF), "oncpu", "-p", pid, "-d", "5", "-o", str(d)])
            fg.append(t - 5)
            data = tmp / f"tta{r}.data"
            start = time.monotonic()
            subprocess.run(["perf", "record", "-g", "-F", "99", "-p", pid, "-o", str(data), "--", "sleep", "5"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            script = subprocess.Popen(["perf", "script", "-i", str(data)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            collapse = subprocess.Popen([f"{tools}/inferno-collapse-perf"], stdin=script.stdout, stdout=subprocess.PIPE)
            with open(tmp / f"tta{r}.svg", "wb") as svg:
                subprocess.run([f"{tools}/inferno-flamegraph"], stdin=collapse.stdout, stdout=svg, check=True)
            script.wait()
            collapse.wait()
            pf.append(time.monotonic() - start - 5)
            log(f"time to answer round {r + 1}/{rounds}: fgbpf {fg[-1]:.3f} s, perf pipeline {pf[-1]:.3f} s")
    finally:
        busy.kill()
        busy.wait()
    return fg, pf


# --- 5. post-processing at scale -------------------------------------------

def synthetic(path, stacks, depth=30, seed=1):
    rng = random.Random(seed)
    names = [f"module{m}::function_{n}" for m in range(50) for n in range(40)]
    with open(path, "w") as f:
        for i in range(stacks):
            # A shared trunk, then a branch that makes every stack unique.
            trunk = [names[(i // (stacks // 10 + 1) + d) % len(names)] for d in range(depth // 2)]
            branch = [names[rng.randrange(len(names))] for _ in range(depth - depth // 2 - 1)]
            f.write(";".join(trunk + branch + [f"leaf_{i}"]) + f" {rng.randrange(1, 1000)}\n")


def gnu_time(cmd, stdout=subprocess.DEVNULL):
    """(wall seconds, peak MB, CPU seconds) of a command, or None if it failed."""
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S", *cmd], stdout=stdout, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        return None
    secs, kb, user, sys_ = proc.stderr.strip().splitlines()[-1].split()
    return float(secs), int(kb) / 1024, float(user) + float(sys_)


def same_frames(a, b):
    """How many frames two flamegraphs draw, if they draw the same ones
    (name, count and share in each frame's tooltip), else None."""
    def frames(p):
        return sorted(re.findall(r"<title>([^<]*)</title>", p.read_text(errors="replace")))
    fa, fb = frames(a), frames(b)
    return len(fa) if fa == fb else None


def post_processing(sizes, rounds, tmp, tools):
    rows = []
    for n in sizes:
        folded = tmp / f"synthetic-{n}.folded"
        synthetic(folded, n)
        runs = {"fgbpf flamegraph": [], "fgbpf report": [], "inferno-flamegraph": []}
        for r in range(rounds):
            out = tmp / f"fg-{n}.svg"
            subprocess.run(["rm", "-f", str(out)])
            # inferno-flamegraph's default detail: frames down to 0.01% wide.
            runs["fgbpf flamegraph"].append(gnu_time([str(FGBPF), "flamegraph", str(folded), "-o", str(out), "--min-width", "0.01"]))
            runs["fgbpf report"].append(gnu_time([str(FGBPF), "report", str(folded)]))
            with open(tmp / f"inferno-{n}.svg", "w") as svg:
                runs["inferno-flamegraph"].append(gnu_time([f"{tools}/inferno-flamegraph", str(folded)], stdout=svg))
            log(f"post-processing {n} stacks round {r + 1}/{rounds}: " +
                ", ".join(f"{k} {v[-1]}" for k, v in runs.items()))
        rows.append((n, runs, same_frames(tmp / f"fg-{n}.svg", tmp / f"inferno-{n}.svg")))
    return rows


# --- 6. fidelity -----------------------------------------------------------

SPLIT = {"work_fifty": 50.0, "work_thirty": 30.0, "work_twenty": 20.0}


def shares_from_folded(lines):
    total, under = 0, {k: 0 for k in SPLIT}
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        try:
            c = float(count)
        except ValueError:
            continue
        total += c
        frames = stack.split(";")
        for k in SPLIT:
            if k in frames:
                under[k] += c
    return {k: 100.0 * v / max(total, 1) for k, v in under.items()}


def fidelity(w, rounds, tmp, tools):
    fg_err, perf_err = [], []
    for r in range(rounds):
        proc = subprocess.Popen([w["split"], "8"])
        try:
            time.sleep(0.3)
            d = tmp / f"fid{r}"
            subprocess.run(["rm", "-rf", str(d)])
            subprocess.run([str(FGBPF), "oncpu", "-F", "999", "-d", "3", "-p", str(proc.pid), "-o", str(d)],
                           stderr=subprocess.DEVNULL, check=True)
            s = shares_from_folded((d / "oncpu.folded").read_text().splitlines())
            fg_err.append(max(abs(s[k] - v) for k, v in SPLIT.items()))
            data = tmp / f"fid{r}.data"
            subprocess.run(["perf", "record", "-g", "-F", "999", "-p", str(proc.pid), "-o", str(data), "--", "sleep", "3"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            script = subprocess.run(["perf", "script", "-i", str(data)], capture_output=True, text=True)
            collapsed = subprocess.run([f"{tools}/inferno-collapse-perf"], input=script.stdout, capture_output=True, text=True)
            s = shares_from_folded(collapsed.stdout.splitlines())
            perf_err.append(max(abs(s[k] - v) for k, v in SPLIT.items()))
        finally:
            proc.kill()
            proc.wait()
        log(f"fidelity round {r + 1}/{rounds}: fgbpf {fg_err[-1]:.2f}, perf {perf_err[-1]:.2f} points")
    return fg_err, perf_err


# --- 7. own footprint --------------------------------------------------------

def footprint_section(fp_fg, fp_perf, seconds):
    L = ["## 7. Own footprint\n", f"A {seconds}-second system-wide capture at 99 Hz.\n",
         "| tool | CPU time | peak memory |\n|---|---|---|",
         f"| fgbpf oncpu (capture, symbolization and all outputs) | {fp_fg[0]:.2f} s | {fp_fg[1]:.0f} MB |"]
    if fp_perf:
        L.append(f"| perf record -a -g (capture only, no flamegraph yet) | {fp_perf[2]:.2f} s | {fp_perf[1]:.0f} MB |")
    return "\n".join(L) + "\n"


def footprint(tmp, seconds):
    d = tmp / "footprint"
    subprocess.run(["rm", "-rf", str(d)])
    proc = subprocess.run([str(FGBPF), "oncpu", "-d", str(seconds), "-o", str(d)], capture_output=True, text=True, check=True)
    fg = own_use(proc.stderr, required=False) or (float("nan"), float("nan"))
    perf = gnu_time(["perf", "record", "-a", "-g", "-F", "99", "-o", str(tmp / "fp.data"), "--", "sleep", str(seconds)])
    return fg, perf


# --- 8. symbolization at scale -------------------------------------------------

def symbolization():
    subprocess.run(["cargo", "build", "--release", "--locked", "--example", "symbolize_speed"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = subprocess.run([str(ROOT / "target/release/examples/symbolize_speed")], capture_output=True, text=True, check=True)
    return out.stdout.strip()


# --- report ----------------------------------------------------------------

def slowdown(times, name):
    return (statistics.median(times[name]) / statistics.median(times["alone"]) - 1) * 100


def write_report(path, args, results):
    on, cost, (off, switches), (tta_fg, tta_perf), (st_fg, st_attach, st_bt), post, (fid_fg, fid_perf), (fp_fg, fp_perf), sym, unw = results
    L = []
    L.append("# Benchmarks\n")
    L.append(f"Generated by `scripts/bench.sh` on {time.strftime('%Y-%m-%d')}. Machine: {machine()}. "
             f"{args.rounds} rounds per row, configurations interleaved; figures are medians with the "
             "range (min–max) in brackets. Ratios are only comparable within this one run.\n")

    L.append("## 1. On-CPU overhead\n")
    L.append("Fixed work on every CPU (`scripts/bench/cpuburn.c`); each profiler samples the whole system.\n")
    L.append("| profiler | run time | slowdown |\n|---|---|---|")
    for name, ts in on.items():
        L.append(f"| {name} | {fmt_spread(ts)} | {'' if name == 'alone' else f'{slowdown(on, name):+.2f}%'} |")
    L.append("")

    L.append("### Measured directly\n")
    L.append("The same samplers at 999 Hz over a busy system, 5 s per round: the time the kernel counted in each "
             "tool's BPF programs (`kernel.bpf_stats_enabled`) and the tool's own process CPU time. "
             "Added CPU is their sum, in milliseconds per second of capture over both CPUs, and as a share of the "
             "machine; the timer interrupts every sampler pays alike are not in it. perf does its stack walking "
             "in the kernel's own perf code, which these counters do not see.\n")
    L.append("| sampler | BPF per sample | samples/s | BPF | own process | added CPU | share of the machine |\n|---|---|---|---|---|---|---|")
    ncpu = os.cpu_count() or 1
    for name, vals in cost.items():
        med = lambda k: statistics.median([v[k] for v in vals if v[k] is not None]) if any(v[k] is not None for v in vals) else None
        per, rate, bpf, own = med("per_sample_us"), med("samples_per_s"), med("bpf_ms_per_s"), med("process_ms_per_s")
        per_txt = f"{per:.2f} µs" if per is not None else "n/a (no BPF)"
        added = (bpf or 0) + (own or 0)
        L.append(f"| {name} | {per_txt} | {rate:.0f} | {bpf:.2f} ms/s | {own:.2f} ms/s | {added:.2f} ms/s | {added / 10 / ncpu:.2f}% |")
    L.append("")

    L.extend(offcpu_section(off, switches))

    L.append("## 3. Time to answer\n")
    L.append("Seconds from the end of a 5-second capture of a busy process to a finished SVG.\n")
    L.append("| pipeline | after the window |\n|---|---|")
    L.append(f"| `fgbpf oncpu -p PID -d 5` | {fmt_spread(tta_fg)} |")
    L.append(f"| `perf record -g` + `perf script` + `inferno-collapse-perf` + `inferno-flamegraph` | {fmt_spread(tta_perf)} |")
    L.append(f"\nfgbpf is {statistics.median(tta_perf) / max(statistics.median(tta_fg), 1e-6):.1f}× faster after the window.\n")

    L.extend(startup_section(st_fg, st_attach, st_bt))

    L.append("## 5. Post-processing at scale\n")
    L.append("Synthetic folded files of depth-30 stacks; wall time and peak memory (GNU time). "
             "`fgbpf flamegraph` runs with `--min-width 0.01`, inferno-flamegraph's default (fgbpf's own is 0.1), "
             "so both draw every frame at least 0.01% of the total wide.\n")
    L.append("| unique stacks | tool | time | peak memory |\n|---|---|---|---|")
    for n, runs, _ in post:
        for tool, vals in runs.items():
            ok = [v for v in vals if v]
            if not ok:
                L.append(f"| {n} | {tool} | failed | |")
                continue
            L.append(f"| {n} | {tool} | {fmt_spread([v[0] for v in ok])} | {statistics.median([v[1] for v in ok]):.0f} MB |")
    L.append("")
    for n, _, same in post:
        L.append(f"- {n} stacks: " + (f"both SVGs draw the same {same} frames, with the same counts."
                                      if same else "the two SVGs draw different frames."))
    L.append("")

    L.append("## 6. Fidelity\n")
    L.append("Largest share error, in points, against the known 50/30/20 split (`tests/workloads/split.c`), 999 Hz for 3 s.\n")
    L.append("| profiler | worst share error |\n|---|---|")
    L.append(f"| fgbpf oncpu | {fmt_spread(fid_fg, 'points', 2)} |")
    L.append(f"| perf record -g + inferno-collapse-perf | {fmt_spread(fid_perf, 'points', 2)} |")
    L.append("")

    L.append(footprint_section(fp_fg, fp_perf, args.footprint))
    L.append("## 8. Symbolization at scale\n")
    L.append("`examples/symbolize_speed.rs`: 100 000 distinct stacks of 20 frames over 50 processes of one "
             "large Rust binary, symbolized after the processes exited.\n")
    L.append(f"```\n{sym}\n```\n")
    L.extend(unwinding.report(unw))
    analysis = ROOT / "scripts/bench/analysis.md"
    if analysis.exists():
        L.append(analysis.read_text())
    old = path.read_text() if path.exists() else ""
    path.write_text(in_order(keep_sections(old, "\n".join(L) + "\n")))


def only_footprint(tmp):
    fg, perf = footprint(tmp, 30)
    return footprint_section(fg, perf, 30)


def offcpu_section(off, switches):
    """Section 2's lines: each tracer's run time of the ping-pong and what
    it added per switch."""
    L = ["## 2. Off-CPU overhead\n"]
    L.append(f"Two threads ping-ponging a byte through pipes, pinned to CPU 0 (`scripts/bench/pingpong.c`), "
             f"{switches:.0f} context switches per run; every tracer covers the whole system. "
             "Added cost per context switch = (run time − run time alone) / switches.\n")
    L.append("| tracer | run time | added per switch |\n|---|---|---|")
    alone = statistics.median(off["alone"])
    for name, ts in off.items():
        added = (statistics.median(ts) - alone) / max(switches, 1) * 1e9
        L.append(f"| {name} | {fmt_spread(ts)} | {'' if name == 'alone' else f'{added:.0f} ns'} |")
    L.append("")
    return L


def only_offcpu(tmp):
    return offcpu_section(*offcpu_overhead(build(tmp), 5, tmp))


def only_wakers(tmp):
    w = build(tmp)
    only = ["alone", "fgbpf offcpu", "fgbpf offcpu --wakers", "offcputime (libbpf-tools)"]
    return wakers_section(*offcpu_overhead(w, 5, tmp, only))


# The peers' binaries built from crates.io (--tools): inferno's, rbspy.
TOOLS = None

# `--only NAME`: one section measured on its own and put in place of the
# one under its heading; (heading, what measures and writes it, help).
ONLY = {
    "side-by-side": ("## 0. Side by side", lambda t: side_by_side.report(side_by_side.measure(5, t)),
                     "fgbpf and its peers attached at once"),
    "footprint": ("## 7. Own footprint", only_footprint, "a 30 s system-wide capture's CPU and memory"),
    "startup": ("## 4. Start-up", lambda t: startup_section(*startup(5, t)), "launch to sampling, 5 rounds"),
    "unwinding": ("## 9. Whole stacks", lambda t: unwinding.report(unwinding.measure(3, t)),
                  "whole stacks: unwinding cost (its rows are one run)"),
    "wakers": ("## 10. Wakers", only_wakers, "--wakers per switch"),
    "offcpu": ("## 2. Off-CPU overhead", only_offcpu, "added cost per context switch, against offcputime"),
    "python": ("## 11. Python", lambda t: python_cost.report(python_cost.measure(3, t)),
               "Python frames per sample"),
    "interpreters": ("## 16. Ruby", lambda t: interp_cost.report(interp_cost.measure(3, t, TOOLS)),
                     "Ruby and PHP frames per sample, against rbspy"),
    "java": ("## 14. Java frames", lambda t: java_cost.report(java_cost.measure(3, t)),
             "Java frames per sample against a native program of similar depth"),
    "node": ("## 15. JavaScript frames", lambda t: node_cost.report(node_cost.measure(3, t)),
             "JavaScript frames per sample against native code and a perf map"),
    "wall-sums": ("## 13. Wall time", lambda t: wall_sums.report(wall_sums.measure(10, t)),
                  "wall time adds up, 10 runs"),
    "top": ("## 17. `fgbpf top`", lambda t: top_cost.report(top_cost.measure(3, t, build(t)["split"])),
            "fgbpf top's own CPU and memory, whole host, against perf top"),
    "go": ("## 18. Goroutines", lambda t: go_cost.report(go_cost.measure(3, t)),
           "a Go program's goroutines read: cost per read, 1,000 to 100,000 goroutines"),
    "otlp": ("## 19. OTLP", lambda t: otlp_cost.report(otlp_cost.measure(3, t)),
             "what sending to an OTLP receiver costs, once and streamed each second"),
    "kernel-paths": ("## 20. Kernel paths", lambda t: kernel_paths.report(kernel_paths.measure(3, t)),
                     "BPF time per sample of each kernel's path, in emulated guests (ratios only)"),
    "switch-parts": ("## 21. A switch's cost, by part", lambda t: switch_parts.report(switch_parts.measure(3, t)),
                     "BPF time per switch with parts left out, and on the churning load, against offcputime"),
    "alloc": ("## 23. Allocations and events", lambda t: alloc_cost.report(alloc_cost.measure(3, t)),
              "fgbpf alloc per malloc/free pair beside heaptrack, and fgbpf events per hit beside bpftrace"),
    "references": ("## 24. Perl, Erlang and LuaJIT", lambda t: reference_cost.report(reference_cost.measure(3, t)),
                   "the profiled program's slowdown under fgbpf and under Perl's, Erlang's and LuaJIT's reference profilers"),
    "versions": ("## 22. Runtime versions", lambda t: versions_cost.report(versions_cost.measure(3, t)),
                 "each runtime's oldest and newest version read: BPF time per sample against its native walk"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", required=True)
    ap.add_argument("--quick", action="store_true", help="fewer rounds and smaller inputs, for a smoke test")
    ap.add_argument("--only", choices=sorted(ONLY), action="append", default=[],
                    help="measure this section alone and replace it in BENCHMARKS.md (repeatable): "
                    + "; ".join(f"{k}: {v[2]}" for k, v in sorted(ONLY.items())))
    ap.add_argument("--only-slices", metavar="BEFORE_COMMIT",
                    help="measure section 12 (time slices) against fgbpf built from BEFORE_COMMIT and replace it")
    args = ap.parse_args()
    global TOOLS
    TOOLS = args.tools
    if args.only_slices:
        slices_cost.only(args.only_slices, build, FGBPF)
        return
    for name in args.only:
        heading, measure, _ = ONLY[name]
        with tempfile.TemporaryDirectory(prefix="fgbpf-bench-") as t:
            section = measure(Path(t))
        replace_section(heading, section if isinstance(section, str) else "\n".join(section) + "\n")
    if args.only:
        return
    args.rounds = 2 if args.quick else 5
    args.footprint = 10 if args.quick else 30
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    with tempfile.TemporaryDirectory(prefix="fgbpf-bench-") as t:
        tmp = Path(t)
        w = build(tmp)
        results = (
            oncpu_overhead(w, args.rounds, tmp),
            sampler_cost(w, max(2, args.rounds - 2), tmp),
            offcpu_overhead(w, args.rounds, tmp),
            time_to_answer(w, max(2, args.rounds - 2), tmp, args.tools),
            startup(args.rounds, tmp),
            post_processing(sizes, max(1, args.rounds - 2), tmp, args.tools),
            fidelity(w, args.rounds, tmp, args.tools),
            footprint(tmp, args.footprint),
            symbolization(),
            unwinding.measure(max(2, args.rounds - 2), tmp),
        )
        out = ROOT / ("BENCHMARKS.quick.md" if args.quick else "BENCHMARKS.md")
        write_report(out, args, results)
        log(f"wrote {out}")
        if not args.quick:
            for name in ("python", "side-by-side", "wall-sums", "java", "node", "interpreters", "top"):
                heading, measure, _ = ONLY[name]
                replace_section(heading, "\n".join(measure(tmp)) + "\n")


if __name__ == "__main__":
    main()
