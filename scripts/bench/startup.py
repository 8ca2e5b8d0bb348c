"""Section 4 of BENCHMARKS.md: start-up. Seconds from launch to sampling:
fgbpf's start message (printed once every perf event is attached), with
its own load-and-attach time, against bpftrace's BEGIN probe, round by
round; and the section's lines."""

import re
import signal
import subprocess
import time
from pathlib import Path

from measures import log
from sections import fmt_spread

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"


def first_line_after(cmd, pattern, stream="stderr"):
    """Seconds from launch until a line matching `pattern` appears."""
    start = time.monotonic()
    out = subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL
    err = subprocess.PIPE if stream == "stderr" else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
    src = proc.stderr if stream == "stderr" else proc.stdout
    elapsed = None
    line_text = ""
    for line in src:
        if re.search(pattern, line):
            elapsed = time.monotonic() - start
            line_text = line
            break
    proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    if elapsed is None:
        raise RuntimeError(f"{cmd[0]} never printed a line matching {pattern!r}")
    return elapsed, line_text


def startup(rounds, tmp):
    fg, fg_attach, bt = [], [], []
    for r in range(rounds):
        d = tmp / f"start{r}"
        subprocess.run(["rm", "-rf", str(d)])
        t, line = first_line_after([str(FGBPF), "oncpu", "-o", str(d)], r"recording")
        fg.append(t)
        m = re.search(r"attached in (\d+) ms", line)
        if m:
            fg_attach.append(int(m.group(1)) / 1000)
        # -B line: bpftrace block-buffers output to a pipe otherwise.
        t, _ = first_line_after(["bpftrace", "-B", "line", "-e", 'profile:hz:99 { @c = count(); } BEGIN { printf("ready\\n"); }'],
                                r"ready", stream="stdout")
        bt.append(t)
        log(f"start-up round {r + 1}/{rounds}: fgbpf {fg[-1]:.3f} s, bpftrace {bt[-1]:.3f} s")
    return fg, fg_attach, bt


def startup_section(st_fg, st_attach, st_bt):
    L = ["## 4. Start-up\n",
         "From launch to sampling (fgbpf: its start message, printed once every perf event is attached; "
         "bpftrace: its BEGIN probe, which runs once its probes are attached).\n",
         "| tool | launch to sampling |\n|---|---|",
         f"| fgbpf oncpu (system-wide) | {fmt_spread(st_fg)} |"]
    if st_attach:
        L.append(f"| of which fgbpf's load and attach | {fmt_spread(st_attach)} |")
    L.append(f"| bpftrace profile:hz:99 | {fmt_spread(st_bt)} |")
    L.append("")
    return L
