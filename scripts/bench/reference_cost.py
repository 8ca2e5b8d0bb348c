"""Section 24 of BENCHMARKS.md: what profiling a Perl, Erlang or LuaJIT
program costs the program, with fgbpf and with each runtime's reference
profiler, measured the same way: the rounds of fixed work a second the
tests' split workload (tests/workloads/*/split.*) runs, alone and
profiled.

- fgbpf: `fgbpf oncpu -F 999 -- COMMAND` (the whole run sampled, the
  runtime's frames read).
- Perl 5.36: Devel::NYTProf (`perl -d:NYTProf`), the reference of
  tests/perl.rs.
- Erlang OTP 25: `perf record -g -F 999` on a node started with `+JPperf
  true` (frame pointers kept, a perf map written: the field's way), the
  flag alone, and eprof (call tracing), the references of tests/beam.rs.
- LuaJIT (OpenResty's 2.1, Debian's `luajit2`): its own profiler,
  `luajit -jp` (with the JIT on, as users run it), the reference of
  tests/luajit.rs.

Each run lasts SECONDS of the workload's own clock; the rate is its
rounds over the wall time from its "ready" line to its "rounds N" line,
as this script reads them. The median of the rounds is reported."""

import os
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
WORKLOADS = ROOT / "tests" / "workloads"
HZ = 999
SECONDS = 8


def rate(argv, env=None):
    """Rounds a second between the workload's "ready" and "rounds N"
    lines, `argv` run to its end."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            text=True, env={**os.environ, **(env or {})})
    ready = end = None
    rounds = 0
    for line in proc.stdout:
        if line.strip() == "ready" and ready is None:
            ready = time.monotonic()
        elif line.startswith("rounds "):
            end = time.monotonic()
            rounds = int(line.split()[1])
    proc.wait()
    assert ready is not None and end is not None and proc.returncode == 0, f"{argv}: exit {proc.returncode}"
    return rounds / (end - ready)


def configs(tmp):
    """(runtime, profiler, argv, env): each runtime's runs, alone first."""
    out = tmp / "fgbpf-out"
    fg = lambda: [str(FGBPF), "oncpu", "-q", "-F", str(HZ), "-o", str(out), "--"]
    beams = tmp / "erlang"
    beams.mkdir(exist_ok=True)
    subprocess.run(["erlc", "-o", str(beams), str(WORKLOADS / "erlang/split.erl")], check=True)
    erl = lambda *flags: ["erl", *flags, "-noshell", "-pa", str(beams), "-s", "split", "main", str(SECONDS)]
    pl = ["perl", str(WORKLOADS / "perl/split.pl"), str(SECONDS)]
    lua = [str(WORKLOADS / "luajit/split.lua"), str(SECONDS)]
    perf = lambda: ["perf", "record", "-q", "-g", "-e", "cpu-clock", "-F", str(HZ), "-o", str(tmp / "perf.data"), "--"]
    home = {"HOME": "/tmp"}
    return [
        ("Perl 5.36", "alone", pl, None),
        ("Perl 5.36", "fgbpf", fg() + pl, None),
        ("Perl 5.36", "NYTProf", ["perl", "-d:NYTProf", *pl[1:]], {"NYTPROF": f"file={tmp / 'nytprof.out'}"}),
        ("Erlang OTP 25", "alone", erl(), home),
        ("Erlang OTP 25", "fgbpf", fg() + erl(), home),
        ("Erlang OTP 25", "+JPperf true, alone", erl("+JPperf", "true"), home),
        ("Erlang OTP 25", "perf record -g, +JPperf true", perf() + erl("+JPperf", "true"), home),
        ("Erlang OTP 25", "eprof", [*erl(), str(tmp / "eprof.log")], home),
        ("LuaJIT 2.1", "alone", ["luajit", *lua], None),
        ("LuaJIT 2.1", "fgbpf", fg() + ["luajit", *lua], None),
        ("LuaJIT 2.1", "luajit -jp", ["luajit", "-jp", *lua], None),
    ]


def measure(rounds, tmp):
    rows = {}
    for r in range(rounds):
        for runtime, profiler, argv, env in configs(tmp):
            rows.setdefault((runtime, profiler), []).append(rate(argv, env))
            subprocess.run(["rm", "-rf", str(tmp / "fgbpf-out")], check=False)
            print(f"bench: reference cost round {r + 1}/{rounds}: {runtime}, {profiler}: {rows[(runtime, profiler)][-1]:.0f} rounds/s",
                  flush=True)
    return rows


def report(rows):
    med = {k: statistics.median(v) for k, v in rows.items()}
    L = ["## 24. Perl, Erlang and LuaJIT: the profiled program's own slowdown, fgbpf against the references\n",
         "The rounds of fixed work a second of each runtime's split workload (tests/workloads/*/split.*, the one the "
         "tests compare shares on), alone and profiled: fgbpf at "
         f"{HZ} Hz over the whole run (`fgbpf oncpu -F {HZ} -- COMMAND`, the runtime's frames read), and the runtime's "
         "reference profiler as its tests run it: Devel::NYTProf for Perl (Debian 12's 5.36), `perf record -g` at "
         f"{HZ} Hz on a node started with `+JPperf true` (and that flag alone, and eprof) for Erlang (OTP 25), and "
         "`luajit -jp` (JIT on) for OpenResty's LuaJIT 2.1. Each run is "
         f"{SECONDS} s of the workload's clock, its rate taken between its `ready` and `rounds N` lines; median of "
         f"{len(next(iter(rows.values())))} rounds (`scripts/bench.sh --only references`). BPF time per sample "
         "against the native walk of the same processes is section 22.\n",
         "| runtime | profiled by | rounds/s (min–max) | slowdown |",
         "|---|---|---|---|"]
    for (runtime, profiler), v in med.items():
        alone = med[(runtime, "alone")]
        slow = "—" if profiler == "alone" else f"{(1 - v / alone) * 100:.1f}%"
        spread = rows[(runtime, profiler)]
        L.append(f"| {runtime} | {profiler} | {v:,.0f} ({min(spread):,.0f}–{max(spread):,.0f}) | {slow} |")
    L.append("\nA slowdown within the alone run's own spread is not told apart from none.")
    return L
