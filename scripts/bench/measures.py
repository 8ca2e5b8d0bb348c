"""Measures the benchmark sections share: the kernel's account of BPF
programs and a process's CPU time."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def timed(cmd, **kw):
    """Runs `cmd` to its end: (seconds it took, its stdout)."""
    start = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True, text=True, **kw)
    return time.monotonic() - start, proc.stdout


def bpf_progs():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True).stdout
    return {p["id"]: p for p in json.loads(out or "[]")}


def proc_cpu(pid):
    """CPU seconds a process's threads have run so far, to the nanosecond
    (schedstat; /proc/PID/stat counts in 10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def own_use(stderr, required=True):
    """fgbpf's account of itself at the end of a capture ("own use: S s
    CPU, M MB peak memory"): (CPU seconds, peak MB), or None when it did
    not print one and `required` is false."""
    m = re.search(r"own use: ([0-9.]+) s CPU, ([0-9]+) MB peak memory", stderr)
    if m:
        return float(m.group(1)), int(m.group(2))
    if required:
        raise RuntimeError(f"fgbpf printed no 'own use:' line; it said:\n{stderr[-2000:]}")
    return None


def attached(cmd, during, settle=1.5):
    """Starts the tracer `cmd`, lets it settle, runs `during()` with the
    kernel's BPF statistics on, and stops it with SIGINT. Returns the
    programs it loaded as the kernel counted them before and after
    (`bpf_progs`), its own CPU over `during` and how long that took."""
    before = set(bpf_progs())
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(settle)
    if proc.poll() is not None:
        raise RuntimeError(f"{cmd[0]} stopped before it was measured")
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        p0, c0, t0 = bpf_progs(), proc_cpu(proc.pid), time.monotonic()
        during()
        p1, c1, t1 = bpf_progs(), proc_cpu(proc.pid), time.monotonic()
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])
        proc.send_signal(2)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    ours = {i: p for i, p in p1.items() if i not in before}
    return {"ours": ours, "p0": p0, "cpu_s": c1 - c0, "secs": t1 - t0}


def delta(run, key, ids):
    """What the kernel counted (`run_time_ns`, `run_cnt`) for the programs
    `ids` of an `attached` run."""
    return sum(run["ours"][i].get(key, 0) - run["p0"].get(i, {}).get(key, 0) for i in ids)


def sampler_run(cmd, seconds, prog_type="perf_event"):
    """Starts the sampler `cmd`, lets it settle, then measures it for
    `seconds` with the kernel's BPF statistics on; stops it with SIGINT.
    Returns the run time (ns) and runs of the programs of `prog_type` it
    loaded (its samplers by default), and its own CPU over the window."""
    run = attached(cmd, lambda: time.sleep(seconds))
    samplers = [i for i, p in run["ours"].items() if p.get("type") == prog_type]
    return {"bpf_ns": delta(run, "run_time_ns", samplers), "runs": delta(run, "run_cnt", samplers), "cpu_s": run["cpu_s"]}
