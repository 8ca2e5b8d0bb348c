"""Section 16 of BENCHMARKS.md: the cost of Ruby and PHP frames. fgbpf's
walkers of Ruby's control frames and PHP's execute data against its
native-only walk (`--no-ruby`, `--no-php`) on the same processes, and
rbspy (from crates.io, the profiler Ruby users know) sampling one Ruby
process at the same rate from outside."""

import statistics
import subprocess
import time
from pathlib import Path

from measures import sampler_run

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
SCRIPTS = {"ruby": ["ruby", str(ROOT / "tests/workloads/ruby/busy.rb"), "600"],
           "php": ["php", str(ROOT / "tests/workloads/php/busy.php"), "600"]}
HZ = 999
SECONDS = 5


def measured(lang, cmd):
    """Runs the sampler `cmd(procs)` for SECONDS over two busy processes of
    `lang` (one per CPU)."""
    procs = [subprocess.Popen(SCRIPTS[lang], stdout=subprocess.DEVNULL) for _ in range(2)]
    time.sleep(0.7)
    try:
        return sampler_run(cmd(procs), SECONDS)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def measure(rounds, tmp, tools):
    rbspy = Path(tools) / "rbspy"
    fg = lambda out, *extra: (lambda ps: [str(FGBPF), "oncpu", "-q", "-F", str(HZ), *extra, "-o", str(tmp / out)])
    configs = [
        ("ruby", "fgbpf oncpu, Ruby frames (default)", fg("rb-on")),
        ("ruby", "fgbpf oncpu --no-ruby (native frames only)", fg("rb-off", "--no-ruby")),
        ("ruby", "rbspy record --nonblocking (one of the two processes)",
         lambda ps: [str(rbspy), "record", "--nonblocking", "--silent", "-r", str(HZ), "-d", "600", "--format",
                     "collapsed", "-p", str(ps[0].pid), "-f", str(tmp / "rbspy.txt"), "--raw-file",
                     str(tmp / "rbspy.raw.gz")]),
        ("php", "fgbpf oncpu, PHP frames (default)", fg("php-on")),
        ("php", "fgbpf oncpu --no-php (native frames only)", fg("php-off", "--no-php")),
    ]
    rows = {(lang, name): [] for lang, name, _ in configs}
    for r in range(rounds):
        for lang, name, cmd in configs:
            subprocess.run(["rm", "-rf", *(str(tmp / o) for o in ("rb-on", "rb-off", "php-on", "php-off"))])
            res = measured(lang, cmd)
            rows[(lang, name)].append(res)
            print(f"bench: interpreters round {r + 1}/{rounds}: {lang}: {name}: {res}", flush=True)
    return rows


def report(rows):
    med = lambda vals: statistics.median(vals) if vals else 0
    L = ["## 16. Ruby and PHP stacks: cost per sample\n",
         "Two Debian `ruby` (3.1) processes running `tests/workloads/ruby/busy.rb`, then two `php` (8.2) "
         f"processes running `tests/workloads/php/busy.php` (one per CPU), sampled at {HZ} Hz for {SECONDS} s. "
         "fgbpf samples the whole system, so each of its samples is an interpreter thread here; BPF time per "
         "sample is the kernel's count (`kernel.bpf_stats_enabled`) over its sampler's runs, own CPU is the "
         "tool's process (draining, naming; writing the outputs at the end is not in the window). rbspy reads "
         f"one process from outside at the same rate: its cost is all its own CPU, per sample at {HZ} Hz. "
         "Median of the rounds.\n",
         "| target | sampler | BPF per sample | own CPU per second | cost per sample |", "|---|---|---|---|---|"]
    for (lang, name), vals in rows.items():
        cpu = med([v["cpu_s"] for v in vals]) / SECONDS
        target = "busy.rb" if lang == "ruby" else "busy.php"
        if "rbspy" in name:
            L.append(f"| {target} | {name} | n/a | {cpu * 1000:.0f} ms | {cpu / HZ * 1e6:.1f} µs |")
            continue
        bpf = med([v["bpf_ns"] / v["runs"] / 1000 for v in vals if v["runs"]])
        runs = med([v["runs"] for v in vals]) / SECONDS
        per = bpf + cpu * 1e6 / max(runs, 1)
        L.append(f"| {target} | {name} | {bpf:.2f} µs | {cpu * 1000:.0f} ms | {per:.2f} µs |")
    L.append("")
    return L
