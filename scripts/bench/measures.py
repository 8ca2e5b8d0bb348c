"""Measures the benchmark sections share: the kernel's account of BPF
programs and a process's CPU time."""

import json
import subprocess
from pathlib import Path


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
