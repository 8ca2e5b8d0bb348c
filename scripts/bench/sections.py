"""Sections of BENCHMARKS.md measured on their own (`scripts/bench.sh
--only-...`): replacing one in place, and the wakers' table."""

import statistics

from measures import log
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fmt_spread(values, unit="s", digits=3):
    med = statistics.median(values)
    return f"{med:.{digits}f} {unit} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def wakers_section(times, switches):
    L = ["## 10. Wakers: cost per context switch\n",
         f"`fgbpf offcpu --wakers` against `fgbpf offcpu` and libbpf-tools `offcputime`, one run of "
         f"`scripts/bench.sh --only-wakers`: the ping-pong of section 2 ({switches:.0f} switches, every one a "
         "wakeup of the other thread), whole system, 5 rounds, median run time. bcc's `offwaketime`, the peer "
         "the issue names, cannot run on this kernel: it attaches a kprobe to `finish_task_switch`, and "
         "kprobes are compiled out here; libbpf-tools has no offwaketime.\n",
         "| tracer | run time | added per switch |\n|---|---|---|"]
    alone = statistics.median(times["alone"])
    for name, ts in times.items():
        added = (statistics.median(ts) - alone) / max(switches, 1) * 1e9
        L.append(f"| {name} | {fmt_spread(ts)} | {'' if name == 'alone' else f'{added:.0f} ns'} |")
    L.append("")
    return "\n".join(L) + "\n"


def replace_section(heading, section):
    """Puts `section` in BENCHMARKS.md in place of the one under `heading`,
    or before "## Against the targets" when there is none."""
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text()
    if heading in text:
        start = text.index(heading)
        nxt = text.find("\n## ", start + 1)
        end = len(text) if nxt < 0 else nxt + 1
    elif heading.startswith("## 0.") and "## 1." in text:
        # The side-by-side figures lead.
        start = end = text.index("## 1.")
    else:
        start = end = text.index("## Against the targets") if "## Against the targets" in text else len(text)
    path.write_text(text[:start] + section + "\n" + text[end:])
    log(f"rewrote {heading} in {path}")
