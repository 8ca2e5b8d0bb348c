"""Sections of BENCHMARKS.md measured on their own (`scripts/bench.sh
--only ...`): replacing one in place, keeping those a full run does not
measure (soaks, the --only ones), and the wakers' table."""

import re
import statistics

from measures import log
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fmt_spread(values, unit="s", digits=3):
    med = statistics.median(values)
    return f"{med:.{digits}f} {unit} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def sections(text):
    """The `## ` sections of a BENCHMARKS.md text, in order: (heading, text)."""
    out = []
    starts = [i for i in range(len(text)) if text.startswith("## ", i) and (i == 0 or text[i - 1] == "\n")]
    for a, b in zip(starts, starts[1:] + [len(text)]):
        out.append((text[a:text.index("\n", a)] if "\n" in text[a:] else text[a:], text[a:b]))
    return out


CONTENTS = ("<!-- contents -->", "<!-- /contents -->")
LAST = "## Against the targets"


def number(heading):
    """The number of a `## N. Title` heading, None for the others."""
    head = heading[3:].split(" ", 1)[0]
    return int(head.rstrip(".")) if head.rstrip(".").isdigit() else None


def anchor(title, seen):
    """GitHub's anchor for a heading's title: lower case, punctuation
    dropped, spaces made hyphens, `-1`, `-2`... on a repeat."""
    slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


def in_order(text):
    """A whole BENCHMARKS.md with its `## ` sections in order: the numbered
    ones by number (so that citations by number find them in sequence),
    then the others (the soaks) in the order they came, "## Against the
    targets" last; and a contents list, made anew, after the lines that
    open the file."""
    parts = sections(text)
    first = text.index(parts[0][1]) if parts else len(text)
    head = text[:first]
    if CONTENTS[0] in head and CONTENTS[1] in head:
        a, b = head.index(CONTENTS[0]), head.index(CONTENTS[1]) + len(CONTENTS[1])
        head = head[:a] + head[b:]
    head = head.rstrip("\n") + "\n\n"
    numbered = sorted((p for p in parts if number(p[0]) is not None), key=lambda p: number(p[0]))
    others = [p for p in parts if number(p[0]) is None and not p[0].startswith(LAST)]
    last = [p for p in parts if p[0].startswith(LAST)]
    ordered = numbered + others + last
    seen = {}
    toc = [CONTENTS[0], "Contents:", ""]
    for h, _ in ordered:
        title = h[3:].strip()
        toc.append(f"- [{title}](#{anchor(title, seen)})")
    toc += ["", CONTENTS[1], ""]
    body = "".join(t.rstrip("\n") + "\n\n" for _, t in ordered)
    return (head + "\n".join(toc) + "\n" + body).rstrip("\n") + "\n"


def keep_sections(old, new):
    """`new` with the sections of `old` it lacks (by heading number or
    title) put back before "## Against the targets": a full run does not
    measure the soaks nor the sections measured by --only alone."""
    def key(h):
        head = h[3:].split(" ", 1)[0]
        return head if head.rstrip(".").isdigit() else h
    note = "*Kept from an earlier run: a full `scripts/bench.sh` does not measure this section.*\n"
    have = {key(h) for h, _ in sections(new)}
    kept = ""
    for h, t in sections(old):
        if key(h) in have or h.startswith("## Against the targets"):
            continue
        t = t if t.endswith("\n") else t + "\n"
        if note not in t:
            t = t.replace("\n", "\n\n" + note, 1)
        kept += t
    if not kept:
        return new
    at = new.find("## Against the targets")
    at = len(new) if at < 0 else at
    return new[:at] + kept + "\n" + new[at:]


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
    or before "## Against the targets" when there is none; the file then
    put in order (`in_order`)."""
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
    path.write_text(in_order(text[:start] + section + "\n" + text[end:]))
    log(f"rewrote {heading} in {path}")
