"""Section 18 of BENCHMARKS.md: what reading a Go program's goroutines
costs fgbpf. `tests/workloads/go/many.go N` parks N goroutines (built with
Debian's `go build`, no flags); `fgbpf offcpu -p PID -d 10` on it with the
goroutine view and with `--no-go`, each round; the difference in fgbpf's
own CPU (user + system, from its summary) over the reads its report says
it made is the cost of a read. Then what telling each sample's goroutine
costs the BPF walker: `tests/workloads/go/labels.go` (two busy goroutines,
one under pprof labels) sampled whole-system at 999 Hz, with and without
`--no-go`. Also: `scripts/bench.sh --only go`, or run alone: `python3
scripts/bench/go_cost.py` (as root)."""

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measures import log, own_use, sampler_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
SECONDS = 10
SIZES = [1_000, 10_000, 100_000]


HZ = 999
SAMPLE_SECONDS = 5


def build(tmp, name="many"):
    out = Path(tmp) / name
    env = dict(os.environ, GOCACHE=str(Path(tmp) / "gocache"), GO111MODULE="off", GOFLAGS="")
    subprocess.run(["go", "build", "-o", str(out), str(ROOT / f"tests/workloads/go/{name}.go")], check=True, env=env)
    return out


def per_sample(rounds, tmp):
    """BPF time per sample and fgbpf's own CPU per second on the busy
    labels program, with goroutines told and with --no-go."""
    labels = build(tmp, "labels")
    proc = subprocess.Popen([str(labels)], stdout=subprocess.PIPE, text=True)
    rows = {"told": [], "no-go": []}
    try:
        assert proc.stdout.readline().startswith("ready")
        for r in range(rounds):
            for name, extra in (("told", []), ("no-go", ["--no-go"])):
                out = Path(tmp) / f"samples-{name}-{r}"
                res = sampler_run([str(FGBPF), "oncpu", "-q", "-F", str(HZ), *extra, "-o", str(out)], SAMPLE_SECONDS)
                rows[name].append(res)
                log(f"goroutines on samples, {name}: {res}")
    finally:
        proc.kill()
        proc.wait()
    return rows


def capture(pid, tmp, extra):
    """fgbpf's own CPU s and peak MB, and the reads its report counts."""
    out = Path(tmp) / f"out-{time.monotonic_ns()}"
    p = subprocess.run([str(FGBPF), "offcpu", "-p", str(pid), "-d", str(SECONDS), "-o", str(out), *extra],
                       capture_output=True, text=True, check=True)
    cpu, peak = own_use(p.stderr)
    report = (out / "report.txt").read_text()
    reads = re.search(r"read ([0-9]+) times\)", report)
    counted = re.search(r"\): ([0-9]+) at the last read", report)
    return cpu, peak, int(reads.group(1)) if reads else 0, int(counted.group(1)) if counted else 0


def measure(rounds, tmp):
    many = build(tmp)
    rows = []
    samples = per_sample(rounds, tmp)
    for n in SIZES:
        proc = subprocess.Popen([str(many), str(n)], stdout=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            assert line.startswith("ready"), line
            for _ in range(rounds):
                with_go = capture(proc.pid, tmp, [])
                without = capture(proc.pid, tmp, ["--no-go"])
                rows.append((n, with_go, without))
                log(f"{n} goroutines: {with_go} against {without}")
        finally:
            proc.kill()
            proc.wait()
    return rows, samples


def report(measured):
    rows, samples = measured
    lines = [
        "## 18. Goroutines: cost of a read",
        "",
        f"`tests/workloads/go/many.go N` (Debian's Go 1.19, `go build`) parks N goroutines; `fgbpf offcpu -p PID -d {SECONDS}`"
        " on it, with its goroutine view and with `--no-go`, each round (`scripts/bench/go_cost.py`). A read's cost is"
        " the difference in fgbpf's own CPU over the reads the report counts (each every 100 ms, or less often to stay"
        " under 2% of a CPU, and one at the end). Medians of the rounds.",
        "",
        "| goroutines | counted | reads in 10 s | fgbpf CPU | with --no-go | per read | per goroutine read | peak MB (--no-go) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in SIZES:
        mine = [r for r in rows if r[0] == n]
        if not mine:
            continue
        mid = sorted(mine, key=lambda r: r[1][0] - r[2][0])[len(mine) // 2]
        (cpu, peak, reads, counted), (cpu0, peak0, _, _) = mid[1], mid[2]
        per = (cpu - cpu0) / max(reads, 1)
        lines.append(f"| {n:,} | {counted:,} | {reads} | {cpu:.2f} s | {cpu0:.2f} s | {1000 * per:.1f} ms |"
                     f" {1e6 * per / n:.2f} µs | {peak} ({peak0}) |")
    med = lambda vals: sorted(vals)[len(vals) // 2] if vals else 0
    lines += [
        "",
        f"Goroutines on samples: `tests/workloads/go/labels.go`, two busy goroutines (one under `pprof.Do` labels),"
        f" sampled whole-system at {HZ} Hz for {SAMPLE_SECONDS} s by `fgbpf oncpu`, with each sample's goroutine and"
        " labels read by the BPF walker (the default) and with `--no-go`. BPF time per sample is the kernel's count"
        " (`kernel.bpf_stats_enabled`) over the sampler's runs. Medians of the rounds.",
        "",
        "| sampler | BPF per sample | own CPU per second |",
        "|---|---|---|",
    ]
    for name, label in (("told", "fgbpf oncpu (goroutine and labels on each sample)"), ("no-go", "fgbpf oncpu --no-go")):
        vals = samples[name]
        bpf = med([v["bpf_ns"] / v["runs"] / 1000 for v in vals if v["runs"]])
        cpu = med([v["cpu_s"] for v in vals]) / SAMPLE_SECONDS
        lines.append(f"| {label} | {bpf:.2f} µs | {cpu * 1000:.0f} ms |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    from sections import replace_section
    with tempfile.TemporaryDirectory() as tmp:
        replace_section("## 18. Goroutines", report(measure(3, tmp)))
