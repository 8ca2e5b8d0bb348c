"""Section 13 of BENCHMARKS.md: does wall time add up? Three threads of
`tests/workloads/mixed.c` (computing 30, 60 and 10 ms of every 100, the
rest asleep) on 2 CPUs, alive through the whole window, captured by
`fgbpf wall -F 499 -d 4 -p PID` ten times. Each thread's on-CPU plus
off-CPU time in wall.folded against the window (report.txt's duration);
beside it, what the same capture's timer samples alone would have given
(each sample weighing 1e6/F µs, as wall.folded did before runs were
measured)."""

import re
import subprocess
import time
from collections import defaultdict
from pathlib import Path

from measures import log

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
HZ = 499


def sums(folded, scale=1):
    out = defaultdict(int)
    for line in Path(folded).read_text().splitlines():
        if line.startswith("#") or " " not in line:
            continue
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        if len(frames) > 1 and frames[1].startswith("mix") and not frames[1].startswith("mixed"):
            out[frames[1]] += int(n) * scale
    return out


def measure(runs, tmp):
    exe = tmp / "mixed"
    subprocess.run(["gcc", "-O2", "-pthread", "-I", str(ROOT / "tests/workloads"), "-o", str(exe),
                    str(ROOT / "tests/workloads/mixed.c")], check=True)
    rows = []
    for r in range(runs):
        child = subprocess.Popen([str(exe), "60", "30", "60", "10"])
        try:
            time.sleep(0.3)
            out = tmp / f"wall{r}"
            subprocess.run(["rm", "-rf", str(out)])
            subprocess.run([str(FGBPF), "wall", "-F", str(HZ), "-d", "4", "-p", str(child.pid), "-o", str(out)],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            child.kill()
            child.wait()
        report = (out / "report.txt").read_text()
        window = float(re.search(r"^duration: ([0-9.]+) s", report, re.M).group(1)) * 1e6
        measured = sums(out / "wall.folded")
        estimated = sums(out / "oncpu.folded", 1_000_000 // HZ)
        for t, v in sums(out / "offcpu.folded").items():
            estimated[t] += v
        rows.append({
            "window": window,
            "measured": {t: v / window for t, v in measured.items()},
            "estimated": {t: v / window for t, v in estimated.items()},
        })
        log(f"wall sums run {r + 1}/{runs}: {rows[-1]}")
    return rows


def report(rows):
    worst = lambda key: max(abs(v - 1) for r in rows for v in r[key].values()) * 100
    spread = lambda key: (min(v for r in rows for v in r[key].values()) * 100,
                          max(v for r in rows for v in r[key].values()) * 100)
    m_lo, m_hi = spread("measured")
    e_lo, e_hi = spread("estimated")
    return [
        "## 13. Wall time adds up\n",
        __doc__.split("\n", 1)[1].strip().replace("\n", " ") + "\n",
        "| per-thread sum | range over all threads and runs | worst distance from the window |",
        "|---|---|---|",
        f"| wall.folded (runs measured at the switches) | {m_lo:.2f}%–{m_hi:.2f}% of the window | {worst('measured'):.2f}% |",
        f"| timer samples × 1e6/F + off-CPU | {e_lo:.2f}%–{e_hi:.2f}% | {worst('estimated'):.2f}% |",
        "",
    ]
