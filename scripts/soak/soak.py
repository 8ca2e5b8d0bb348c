#!/usr/bin/env python3
"""scripts/soak.sh's measuring half.

  soak.py sample PID T0          one row, tab-separated, on stdout
  soak.py report DIR MINUTES     the "## Soak" section of BENCHMARKS.md
  soak.py flight-report DIR MINUTES SECONDS [SLOWER]
                                 the "## Flight soak" section (scripts/flight-soak.sh)
  soak.py bpf-programs OUT       the BPF programs loaded now, with their run time
                                 (kernel.bpf_stats_enabled), as JSON in OUT
  soak.py cpu PID                PID's CPU seconds so far
  soak.py bpf-cost DIR           run time (s) of the programs loaded between
                                 DIR/bpf-before and DIR/bpf-start, to DIR/bpf-end
  soak.py flight-cost DIR SECS PERF_SECS REV
                                 the "## Flight cost by churn" section
                                 (scripts/flight-cost.sh)

A row: seconds since T0, fgbpf's resident and peak memory (VmRSS, VmHWM),
its CPU seconds so far (utime + stime of all its threads), and the fill of
each of its BPF hash and stack maps (entries / max_entries, read with
bpftool from the maps fgbpf holds open).
"""
import json
import re
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "bench"))

FILLED = {"hash", "lru_hash", "percpu_hash", "stack_trace"}


def status(pid):
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def cpu_seconds(pid):
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def map_ids(pid):
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
                if line.startswith("map_id:"):
                    ids.add(int(line.split()[1]))
        except OSError:
            pass
    return sorted(ids)


def bpftool(*args):
    out = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def fills(pid):
    out = []
    for i in map_ids(pid):
        try:
            info = bpftool("map", "show", "id", str(i))
            if info.get("type") not in FILLED:
                continue
            n = len(bpftool("map", "dump", "id", str(i)))
            out.append(f"{info['name']} {n}/{info['max_entries']}")
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            continue
    return ", ".join(sorted(out))


def sample(pid, t0):
    s = status(pid)
    row = [f"{time.time() - t0:.0f}", f"{s['VmRSS']:.1f}", f"{s['VmHWM']:.1f}",
           f"{cpu_seconds(pid):.2f}", fills(pid)]
    print("\t".join(row), flush=True)


def bpf_programs(out):
    from measures import bpf_progs
    Path(out).write_text(json.dumps(bpf_progs()))


def bpf_cost(work):
    """The run time (s) of the programs fgbpf loaded (those in bpf-start
    and not in bpf-before) between bpf-start and bpf-end: what the
    recorder costs in the kernel, in the tasks it records."""
    try:
        before, start, end = (json.loads((work / f"bpf-{n}").read_text()) for n in ("before", "start", "end"))
    except (OSError, ValueError):
        return None
    ours = [i for i in start if i not in before]
    return sum(end.get(i, {}).get("run_time_ns", 0) - start[i].get("run_time_ns", 0) for i in ours) / 1e9


def report(work, minutes):
    from bench import replace_section
    work = Path(work)
    rows = [line.split("\t") for line in (work / "rows").read_text().splitlines() if line.strip()]
    summary = json.loads((work / "summary.json").read_text() or "{}")
    load = (work / "load.out").read_text().split()
    made = dict(zip(load[0::2], load[1::2]))
    # FGBPF_SOAK_BIN runs another build (soak.sh): its section is its own.
    other = os.environ.get("FGBPF_SOAK_BIN")
    heading = f"## Soak of {other}" if other else "## Soak"
    lines = [
        heading,
        "",
        f"`{'FGBPF_SOAK_BIN=' + other + ' ' if other else ''}scripts/soak.sh {minutes}`: `fgbpf wall` on the whole system for {minutes} minutes against",
        "`scripts/soak/load.c` (gcc -O2): fork+exec of `/bin/true`, short threads, dlopen/dlclose of",
        "libz and libm, and every 500 ms a process in a private mount namespace running a copy of",
        "itself from a tmpfs only it sees. The load made "
        + ", ".join(f"{v} {k}" for k, v in made.items()) + ".",
        "",
        "| s | RSS MB | peak RSS MB | CPU s | BPF map fill (entries/max) |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    lost = summary.get("lost") or []
    fmt = lambda key, digits: (f"{summary[key]:.{digits}f}" if isinstance(summary.get(key), (int, float)) else "?")
    lines += [
        "",
        f"End: {summary.get('total', '?')} {summary.get('unit', '')} in {summary.get('unique_stacks', '?')} "
        f"unique stacks, {fmt('unresolved_leaf_pct', 1)}% with an unresolved leaf; "
        f"fgbpf's own CPU {fmt('own_cpu_s', 1)} s, peak memory {fmt('own_peak_rss_mb', 0)} MB "
        "(the peak is reached after the capture, while every stack is named and the outputs written).",
        "Lost: " + ("none" if not lost else "; ".join(json.dumps(x) for x in lost)) + ".",
        "",
    ]
    held = summary.get("registry") or {}
    if held:
        lines += [
            f"Process registry at the end: the maps of {held['processes']} processes "
            f"({held['mappings']} mappings), {held['retired']} exited processes let go of with "
            f"{held['located']} addresses of their stacks kept located, {held['binaries']} binaries and "
            f"{held['roots']} other mount namespaces' roots held open; about "
            f"{held['bytes'] / 1e6:.1f} MB besides the binaries' own data.",
            "",
        ]
    # FGBPF_MEMORY_STAGES=1 (soak.sh): the peak of each step of the end.
    stages = [l.split("fgbpf memory: ", 1)[1] for l in (work / "stderr").read_text(errors="replace").splitlines()
              if l.startswith("fgbpf memory: ")]
    if stages:
        capture = None
        table = ["| step | peak MB | peak / capture's peak | at its end: resident MB | of it files mapped | allocated (malloc) MB |",
                 "|---|---|---|---|---|---|"]
        for st in stages:
            name, rest = st.split(": peak ", 1)
            peak = float(rest.split(" MB", 1)[0])
            capture = capture or peak
            m = re.search(r"now ([0-9.]+) MB \(([0-9.]+) MB of it files mapped\), allocated ([0-9.]+) MB", rest)
            now, files, alloc = m.groups() if m else ("", "", "")
            table.append(f"| {name} | {peak:.1f} | {peak / capture:.2f}x | {now} | {files} | {alloc} |")
        lines += [
            "Where the end's memory goes (`FGBPF_MEMORY_STAGES=1`: each step's peak resident memory, "
            "from the end of the step before; the first is the capture's own peak; then what was resident "
            "at the step's end, how much of it files mapped (the probe's maps, binaries read for names) and "
            "how much the allocator had handed out):",
            "",
        ] + table + [""]
    # Rows taken while capturing; the last ones may fall in the end's work.
    during = [r for r in rows if float(r[0]) <= int(minutes) * 60]
    if len(during) >= 2:
        first, last = during[0], during[-1]
        grew = float(last[1]) - float(first[1])
        procs = int(made.get("processes", 0)) + int(made.get("namespaced", 0))
        per = grew * 1024 / procs if procs else 0
        lines += [
            f"While capturing, resident memory went from {first[1]} MB at {first[0]} s to {last[1]} MB at "
            f"{last[0]} s: {grew:+.1f} MB, {per:.2f} KB per process that came and went ({procs} of them).",
            "",
        ]
    replace_section(heading, "\n".join(lines))


def flight_report(work, minutes, seconds, slower="1"):
    from bench import replace_section
    work = Path(work)
    rows = [line.split("\t") for line in (work / "rows").read_text().splitlines() if line.strip()]
    load = (work / "load.out").read_text().split()
    made = dict(zip(load[0::2], load[1::2]))
    dumps = [line.split(" ", 2) for line in (work / "dumps.log").read_text().splitlines() if line.strip()]
    said = (work / "stderr").read_text(errors="replace").splitlines()
    cpus = os.cpu_count() or 1
    peak = max(float(r[2]) for r in rows)
    top_rss = max(float(r[1]) for r in rows)
    cpu = float(rows[-1][3])
    span = float(rows[-1][0])
    share = 100 * cpu / span / cpus
    bpf = bpf_cost(work)
    heading = "## Flight soak" if slower == "1" else f"## Flight soak, churn divided by {slower}"
    command = f"scripts/flight-soak.sh {minutes}" + ("" if slower == "1" else f" {slower}")
    pace = "" if slower == "1" else f" with its churning loops' pauses multiplied by {slower}"
    lines = [
        heading,
        "",
        f"`{command}`: `fgbpf flight` with its defaults (49 Hz, `--keep 10m`) on the whole",
        f"system for {minutes} minutes against `scripts/soak/load.c` (as in the Soak section){pace}, `fgbpf dump` every",
        "15 minutes and at the end. The load made " + ", ".join(f"{v} {k}" for k, v in made.items()) + ".",
        "",
        f"**Resident memory at most {top_rss:.1f} MB in the 10-s rows; peak (VmHWM, dumps included) {peak:.1f} MB**"
        f" (ceiling 200 MB: {'met' if peak <= 200 else 'NOT met'}). **Own CPU {cpu:.1f} s over {span:.0f} s:"
        f" {share:.2f}% of the {cpus}-CPU machine** (goal 1%: {'met' if share <= 1 else 'NOT met'}).",
        "",
        ("Its BPF programs ran " + (f"{bpf:.1f} s over the run ({100 * bpf / float(seconds) / cpus:.2f}% of the machine), "
         f"in the tasks they recorded (`kernel.bpf_stats_enabled`, on for the run): {share + 100 * bpf / float(seconds) / cpus:.2f}% "
         "of the machine with the process's own." if bpf is not None else "Its BPF programs' run time was not read.")),
        "",
        "| dump asked at s | took s | window held s | its report's losses |",
        "|---|---|---|---|",
    ]
    # "dump (WHY): wrote the last SECONDS s to DIR/": the window each held
    # (shorter than --keep when the memory ceiling cut it).
    held = {}
    for l in said:
        if ": wrote the last " in l:
            secs, _, rest = l.split(": wrote the last ", 1)[1].partition(" s to ")
            held[rest.rstrip("/")] = secs
    for at, took, where in dumps:
        report = Path(where) / "report.txt"
        lost = f"(no dump: {where})"
        if report.is_file():
            # One "lost: N WHAT (REMEDY)" line per cause, or "lost: none".
            lost = "; ".join(l.split(":", 1)[1].strip() for l in report.read_text(errors="replace").splitlines()
                             if l.startswith("lost:")) or "?"
        lines.append(f"| {float(at):.0f} | {float(took):.1f} | {held.get(where.rstrip('/'), '?')} | {lost} |")
    notes = [l for l in said if "could not" in l or "lost" in l or "memory:" in l]
    lines += [
        "",
        f"fgbpf said {len(said)} lines; of them about losses or failures: "
        + ("none" if not notes else "; ".join(notes[:12])) + ".",
        "",
        "| s | RSS MB | peak RSS MB | CPU s | BPF map fill (entries/max) |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {' | '.join(r)} |" for r in rows[:: max(1, len(rows) // 40)]]
    lines.append("")
    replace_section(heading, "\n".join(lines))


def flight_cost(work, secs, perf_secs, rev):
    """DIR/rows: one line a pace: PACE CLONES_PER_S FGBPF_CPU BPF_S PERF_CPU
    and what the load made ("processes N threads N ...")."""
    from bench import replace_section
    secs, perf_secs = float(secs), float(perf_secs)
    cpus = os.cpu_count() or 1
    heading = "## Flight cost by churn"
    lines = [
        heading,
        "",
        f"`scripts/flight-cost.sh` on {rev}: whole-host `fgbpf flight` with its defaults (49 Hz, `--keep 10m`) for"
        f" {secs:.0f} s at each pace of `scripts/soak/load.c` (`load SECONDS SLOWER`: its fork-and-exec,"
        " thread and dlopen loops' pauses multiplied by SLOWER; 1 is the soak's load), then"
        f" `perf record -a -g -F 49` for {perf_secs:.0f} s on the same load. Shares are of the {cpus}-CPU machine;"
        " fgbpf's BPF programs' run time is from `kernel.bpf_stats_enabled`, perf's sampling in the kernel is not"
        " counted (as fgbpf's own column does not count its BPF).",
        "",
        "| load pace | new processes /s | clones /s (all) | fgbpf own CPU | its BPF programs | fgbpf in all | perf record -a -g own CPU | fgbpf per new process above idle (own + BPF) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for line in (Path(work) / "rows").read_text().splitlines():
        f = line.split()
        if len(f) < 5:
            continue
        pace, clones, cpu, bpf, perf = f[0], int(f[1]), float(f[2]), float(f[3]), float(f[4])
        made = dict(zip(f[5::2], f[6::2]))
        # The load runs SECS + PERF_SECS + 25 s (scripts/flight-cost.sh).
        procs = int(made.get("processes", 0)) / (secs + perf_secs + 25)
        rows.append((pace, clones, cpu, bpf, perf, procs))
    idle = next((r for r in rows if r[0] == "idle"), None)
    for pace, clones, cpu, bpf, perf, procs in rows:
        own, kern = 100 * cpu / secs / cpus, 100 * bpf / secs / cpus
        # What a process that comes and goes costs: the CPU above the idle
        # host's over the processes made in the window.
        each = "n/a"
        if idle and pace != "idle" and procs > 0:
            made_in_window = procs * secs
            per_own = 1000 * (cpu - idle[2]) / made_in_window
            per_bpf = 1000 * (bpf - idle[3]) / made_in_window
            each = f"{per_own + per_bpf:.3f} ms ({per_own:.3f} + {per_bpf:.3f})"
        lines.append(
            f"| {'idle' if pace == 'idle' else 'x' + pace} | {procs:.0f} | {clones} | {own:.2f}% | {kern:.2f}% |"
            f" {own + kern:.2f}% | {100 * perf / perf_secs / cpus:.2f}% | {each} |")
    lines.append("")
    replace_section(heading, "\n".join(lines))


if __name__ == "__main__":
    if sys.argv[1] == "sample":
        sample(int(sys.argv[2]), float(sys.argv[3]))
    elif sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "bpf-programs":
        bpf_programs(sys.argv[2])
    elif sys.argv[1] == "flight-report":
        flight_report(*sys.argv[2:6])
    elif sys.argv[1] == "cpu":
        print(f"{cpu_seconds(int(sys.argv[2])):.2f}")
    elif sys.argv[1] == "bpf-cost":
        print(f"{bpf_cost(Path(sys.argv[2])) or 0:.3f}")
    elif sys.argv[1] == "flight-cost":
        flight_cost(*sys.argv[2:6])
    else:
        sys.exit(__doc__)
