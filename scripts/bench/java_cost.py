"""Section 14 of BENCHMARKS.md: what walking Java frames costs.

A busy JVM (`tests/workloads/java/Busy.java` on the distribution's
OpenJDK: `main` -> `outer` -> `inner`, compiled and inlined by C2, its
thread 12 frames from `clone3` to `Busy.inner`, 10 of them walked,
`inner` being inlined) and a native program of similar depth
(`tests/workloads/plain.c deep` built `gcc -O2`: 14 frames from `_start`
to `level10`) run
at the same time, one on each CPU; two `fgbpf oncpu -F 999` are attached
at once, each to one of them (`-p`). Both samplers' programs run on every
tick of both CPUs and drop the other's samples, so the BPF time each
spends per sample it records (the kernel's own count,
`kernel.bpf_stats_enabled`) differs by what recording its target's
stacks costs: the Java walk against the native one. Also: fgbpf's own
CPU time (reading the JVM's structures and naming its frames included),
from its summary.
"""

import signal
import statistics
import subprocess
import time
from pathlib import Path

from measures import bpf_progs, log, own_use

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
SECONDS = 5


def build(tmp):
    classes = tmp / "java-classes"
    classes.mkdir(exist_ok=True)
    subprocess.run(["javac", "-d", str(classes), str(ROOT / "tests/workloads/java/Busy.java")], check=True)
    plain = tmp / "plain-O2-java-bench"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(plain), str(ROOT / "tests/workloads/plain.c")], check=True)
    return classes, plain


def start_jvm(classes):
    jvm = subprocess.Popen(["java", "-cp", str(classes), "Busy", "600"], stdout=subprocess.PIPE, text=True)
    assert jvm.stdout.readline().strip() == "ready"
    return jvm


def attach_with(pid, out, args):
    """`fgbpf oncpu -F 999 ARGS -p PID`, running; and its BPF programs."""
    before = set(bpf_progs())
    proc = subprocess.Popen([str(FGBPF), "oncpu", "-F", "999", *args, "-p", str(pid), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    return proc, [i for i in bpf_progs() if i not in before]



def samples(folded):
    total = 0
    for line in Path(folded).read_text().splitlines():
        if line.startswith("#") or " " not in line:
            continue
        total += int(line.rsplit(" ", 1)[1])
    return total


def named_share(folded):
    """Share of the JVM's samples whose stack holds Busy.inner, named."""
    total = named = 0
    for line in Path(folded).read_text().splitlines():
        if line.startswith("#") or " " not in line:
            continue
        stack, n = line.rsplit(" ", 1)
        total += int(n)
        if "Busy.inner" in stack:
            named += int(n)
    return named * 100.0 / total if total else 0.0


def sample_pair(targets):
    """Two `fgbpf oncpu -F 999` at once, one per (process, output, extra
    arguments), for SECONDS with the kernel's BPF statistics on; kills the
    processes. The BPF time each fgbpf's sampling programs took (ns), and
    what each fgbpf said."""
    try:
        attached = [attach_with(p.pid, out, args) for p, out, args in targets]
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
        p0 = bpf_progs()
        time.sleep(SECONDS)
        p1 = bpf_progs()
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])
        errs = []
        for proc, _ in attached:
            proc.send_signal(signal.SIGINT)
            errs.append(proc.communicate(timeout=120)[1])
    finally:
        for p, _, _ in targets:
            p.kill()
            p.wait()

    def ns(ids):
        sel = [i for i in ids if p1.get(i, {}).get("type") == "perf_event"]
        return sum(p1[i].get("run_time_ns", 0) - p0.get(i, {}).get("run_time_ns", 0) for i in sel)

    return [ns(ids) for _, ids in attached], errs


def own_cpu(stderr):
    use = own_use(stderr, required=False)
    return use[0] if use else None


def measure(rounds, tmp):
    classes, plain = build(tmp)
    rows = []
    for r in range(rounds):
        jvm = start_jvm(classes)
        native = subprocess.Popen([str(plain), "deep", "1000"], stdout=subprocess.DEVNULL)
        outs = {k: tmp / f"java-{k}-{r}" for k in ("java", "native")}
        for o in outs.values():
            subprocess.run(["rm", "-rf", str(o)])
        (ns_java, ns_native), errs = sample_pair([(jvm, outs["java"], []), (native, outs["native"], [])])
        row = {
            "java_ns": ns_java, "native_ns": ns_native,
            "java_samples": samples(outs["java"] / "oncpu.folded"),
            "native_samples": samples(outs["native"] / "oncpu.folded"),
            "named": named_share(outs["java"] / "oncpu.folded"),
            "java_cpu": own_cpu(errs[0]), "native_cpu": own_cpu(errs[1]),
        }
        rows.append(row)
        log(f"java round {r + 1}/{rounds}: {row}")
    return rows


def report(rows):
    per = lambda r, k: r[f"{k}_ns"] / max(r[f"{k}_samples"], 1)
    spread = lambda vals, f: f"{f(statistics.median(vals))} ({f(min(vals))}–{f(max(vals))})"
    us = lambda v: f"{v / 1000:.2f} µs"
    ratios = [per(r, "java") / per(r, "native") for r in rows if per(r, "native")]
    cpu = [(r["java_cpu"], r["native_cpu"]) for r in rows if r["java_cpu"] is not None and r["native_cpu"] is not None]
    L = ["## 14. Java frames\n", __doc__.split("\n\n", 1)[1].strip() + "\n",
         "| | busy JVM | native, similar depth | ratio (goal ≤ 3×) |", "|---|---|---|---|",
         f"| BPF time per recorded sample | {spread([per(r, 'java') for r in rows], us)} "
         f"| {spread([per(r, 'native') for r in rows], us)} | {spread(ratios, lambda v: f'{v:.2f}×')} |"]
    if cpu:
        L.append(f"| fgbpf's own CPU for a {SECONDS + 2} s capture, naming included | "
                 f"{spread([c[0] for c in cpu], lambda v: f'{v:.2f} s')} | {spread([c[1] for c in cpu], lambda v: f'{v:.2f} s')} | |")
    L.append(f"\nThe JVM's samples with `Busy.inner` named: {spread([r['named'] for r in rows], lambda v: f'{v:.1f}%')}; "
             f"{len(rows)} rounds.\n")
    return L
