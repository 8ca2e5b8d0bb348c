"""Section 9 of BENCHMARKS.md: the cost of whole user stacks. Walking with
.eh_frame tables in BPF against fgbpf's own frame-pointer walk, bpftrace's
`ustack` (frame pointers) and `perf record --call-graph dwarf` (copies the
stack per sample, unwinds later), on the same 10-deep workload; and what
the tables cost to build."""

import os
import statistics
import subprocess
import time
from pathlib import Path

from measures import proc_cpu, sampler_run

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
HZ = 999
SECONDS = 5


def build(tmp):
    src = ROOT / "tests/workloads/plain.c"
    plain, fp = tmp / "plain-O2", tmp / "plain-fp"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(plain), str(src)], check=True)
    subprocess.run(["clang", "-O2", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer",
                    "-pthread", "-o", str(fp), str(src)], check=True)
    return str(plain), str(fp)


def dir_bytes(path):
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def run_one(cmd, out_path, workload):
    """Runs `cmd` system-wide over two copies of `workload` (one per CPU)
    for SECONDS; returns BPF ns and runs of its perf_event programs, its
    process CPU, and the bytes it wrote."""
    busy = [subprocess.Popen([workload, "deep", "1000"], stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        time.sleep(0.3)
        res = sampler_run(cmd, SECONDS)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    res["bytes"] = dir_bytes(out_path) if out_path and Path(out_path).exists() else 0
    return res


def perf_dwarf(tmp, workload):
    """perf record --call-graph dwarf over the same workload, then the
    `perf script` that unwinds what it copied."""
    data = tmp / "dwarf.data"
    busy = [subprocess.Popen([workload, "deep", "1000"], stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        time.sleep(0.3)
        rec = subprocess.Popen(["perf", "record", "-q", "-a", "-F", str(HZ), "--call-graph", "dwarf",
                                "-e", "cpu-clock", "-o", str(data), "--", "sleep", str(SECONDS)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c0 = proc_cpu(rec.pid)
        c1 = c0
        while rec.poll() is None:
            try:
                c1 = proc_cpu(rec.pid)
            except OSError:
                break
            time.sleep(0.1)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    usage0 = os.times()
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,sym"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    usage1 = os.times()
    blocks = [b for b in script.stdout.split("\n\n") if b.strip()]
    samples = len(blocks)
    # `perf script -F ip,sym` lines: "ADDR SYMBOL" (no offset).
    reaches = lambda b: any(line.split()[-1:] == ["main"] for line in b.splitlines())
    whole = sum(1 for b in blocks if reaches(b))
    post = (usage1.children_user - usage0.children_user) + (usage1.children_system - usage0.children_system)
    return {"record_cpu_s": c1 - c0, "script_cpu_s": post, "bytes": data.stat().st_size,
            "samples": samples, "whole": whole}


def whole_share(folded):
    total = whole = 0
    for line in Path(folded).read_text().splitlines():
        if line.startswith("# ") or " " not in line:
            continue
        stack, n = line.rsplit(" ", 1)
        if stack.split(";")[0].startswith("plain"):
            total += int(n)
            if ";main;" in stack and ";level10;" in stack:
                whole += int(n)
    return whole * 100.0 / max(total, 1)


def table_builds():
    """Rows, bytes and build time of the tables of a few real binaries."""
    files = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/python3.11", "/usr/bin/redis-server", str(FGBPF)]
    # The largest shared library here (clang's).
    files += sorted(str(p) for p in Path("/usr/lib/x86_64-linux-gnu").glob("libLLVM-*.so.1"))[-1:]
    out = subprocess.run(["cargo", "run", "--release", "--quiet", "--example", "unwind_tables", "--", *files],
                         cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or out.stderr.strip()


def measure(rounds, tmp):
    plain, fp = build(tmp)
    configs = [
        ("fgbpf, .eh_frame tables (gcc -O2 build)", plain, lambda d: [str(FGBPF), "oncpu", "-F", str(HZ), "-o", d]),
        ("fgbpf, .eh_frame tables (frame-pointer build)", fp, lambda d: [str(FGBPF), "oncpu", "-F", str(HZ), "-o", d]),
        # As on 5.10 to 5.14: no bpf_loop, no bpf_task_pt_regs. The
        # walker programs are tail-called, so their time is the sampler's.
        ("fgbpf, .eh_frame tables by tail calls, kernels without bpf_loop (gcc -O2 build)", plain,
         lambda d: ["env", "FGBPF_FORCE_FALLBACK=no-task-regs", str(FGBPF), "oncpu", "-F", str(HZ), "-o", d]),
        ("fgbpf, frame pointers only (frame-pointer build)", fp,
         lambda d: [str(FGBPF), "oncpu", "-F", str(HZ), "--max-unwind-rows", "0", "-o", d]),
        ("bpftrace ustack (frame-pointer build)", fp,
         lambda d: ["bpftrace", "-e", f"profile:hz:{HZ} {{ @[ustack] = count(); }}"]),
    ]
    rows = {name: [] for name, _, _ in configs}
    for r in range(rounds):
        for name, workload, cmd in configs:
            d = str(tmp / f"unw{r}-{abs(hash(name))}")
            subprocess.run(["rm", "-rf", d])
            res = run_one(cmd(d), d if "fgbpf" in name else None, workload)
            if "fgbpf" in name and Path(d, "oncpu.folded").exists():
                res["whole"] = whole_share(Path(d, "oncpu.folded"))
            rows[name].append(res)
            print(f"bench: unwinding round {r + 1}/{rounds}: {name}: {res}", flush=True)
    dwarf = [perf_dwarf(tmp, plain) for _ in range(max(1, rounds - 1))]
    return rows, dwarf, table_builds()


def report(results):
    rows, dwarf, tables = results
    med = lambda vals: statistics.median(vals) if vals else 0
    L = ["## 9. Whole stacks: unwinding cost\n",
         f"The 10-deep chain of `tests/workloads/plain.c` (`plain deep`), two copies busy on both CPUs, sampled "
         f"system-wide at {HZ} Hz for {SECONDS} s; built twice: plain `gcc -O2` (no frame pointers, as users "
         "build) and clang with frame pointers. BPF time per sample is the kernel's count "
         "(`kernel.bpf_stats_enabled`) over the sampler's runs; own CPU is the tool's process; bytes are what "
         "it wrote for the capture. Whole: share of the workload's samples whose stack holds main … level10.\n",
         "| walker | BPF per sample | own CPU | bytes written | whole stacks |", "|---|---|---|---|---|"]
    for name, vals in rows.items():
        per = med([v["bpf_ns"] / v["runs"] / 1000 for v in vals if v["runs"]])
        cpu = med([v["cpu_s"] for v in vals])
        b = med([v["bytes"] for v in vals])
        whole = med([v["whole"] for v in vals if "whole" in v])
        whole_txt = f"{whole:.1f}%" if any("whole" in v for v in vals) else "n/a"
        L.append(f"| {name} | {per:.2f} µs | {cpu * 1000:.0f} ms | {b / 1024:.0f} KB | {whole_txt} |")
    if dwarf:
        rec = med([d["record_cpu_s"] for d in dwarf])
        post = med([d["script_cpu_s"] for d in dwarf])
        b = med([d["bytes"] for d in dwarf])
        samples = med([d["samples"] for d in dwarf])
        whole = med([d["whole"] * 100.0 / max(d["samples"], 1) for d in dwarf])
        L.append(f"| perf record --call-graph dwarf + perf script (gcc -O2 build) | n/a (in perf's kernel code) | "
                 f"{rec * 1000:.0f} ms record + {post * 1000:.0f} ms script | {b / 1024:.0f} KB | {whole:.1f}% reach main |")
        L.append("")
        tab = rows.get("fgbpf, .eh_frame tables (gcc -O2 build)", [])
        if tab:
            fg_cpu = med([v["cpu_s"] + v["bpf_ns"] / 1e9 for v in tab])
            fg_bytes = med([v["bytes"] for v in tab])
            L.append(f"Against perf's DWARF mode on the same build: fgbpf's own CPU plus its BPF time is "
                     f"{fg_cpu * 1000:.0f} ms against {(rec + post) * 1000:.0f} ms for perf's record and script "
                     f"({(rec + post) / max(fg_cpu, 1e-9):.0f}× less), and it wrote "
                     f"{b / max(fg_bytes, 1):.0f}× fewer bytes ({samples:.0f} perf samples). perf's in-kernel "
                     "copying of 8 KB of stack per sample is not in either figure.\n")
    L.append("### Table builds\n")
    L.append("`examples/unwind_tables.rs` over real binaries: rows after merging, kernel bytes (16 per row), "
             "and compile time.\n")
    L.append(f"```\n{tables}\n```\n")
    return L
