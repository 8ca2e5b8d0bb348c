#!/usr/bin/env python3
"""The closing lines of scripts/test.sh, from the logs of `cargo test` runs.

Usage: test-summary.py [--root] LABEL=LOG [LABEL=LOG...]

(LOG is what follows the last '=', so a label may hold one.)

For each log (the output of one `cargo test --no-fail-fast` run) prints one
line: `LABEL: N passed, N failed, N ignored[, N filtered out] in B
binaries`, summed over the binaries' own `test result:` lines, each binary
counted once. A binary that started ("Running ...") but printed no result
(it crashed, was killed or timed out) is a failure, named on a line of its
own. With --root (the run was root's), an ignored test is a failure too:
capture tests need root and must have run. Exits 1 when anything failed.
"""

import re
import sys

RESULT = re.compile(
    r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; \d+ measured; (\d+) filtered out"
)
START = re.compile(r"^\s+(?:Running (\S+)|Doc-tests (\S+))")


def binaries(text):
    """(name, (passed, failed, ignored, filtered) or None) per binary run."""
    out = []
    for line in text.splitlines():
        m = START.match(line)
        if m:
            out.append([m.group(1) or "doc-tests " + m.group(2), None])
            continue
        m = RESULT.match(line)
        if m:
            counts = tuple(int(g) for g in m.groups())
            if out and out[-1][1] is None:
                out[-1][1] = counts
            else:
                # A test binary's own output, run without cargo.
                out.append(["the test binary", counts])
    return out


def summarize(label, text, root):
    """The lines for one log, and whether it failed."""
    runs = binaries(text)
    passed = failed = ignored = filtered = 0
    lines = []
    bad = False
    for name, counts in runs:
        if counts is None:
            lines.append(f"{label}: {name} ended without a result (crashed, killed or timed out): a failure")
            bad = True
            continue
        passed += counts[0]
        failed += counts[1]
        ignored += counts[2]
        filtered += counts[3]
    if not runs:
        lines.append(f"{label}: no test binary ran: a failure")
        bad = True
    head = f"{label}: {passed} passed, {failed} failed, {ignored} ignored"
    if filtered:
        head += f", {filtered} filtered out"
    head += f" in {len(runs)} binaries"
    if failed:
        bad = True
    if ignored and root:
        lines.append(f"{label}: {ignored} tests ignored in a root run: every test must run (none is ignored)")
        bad = True
    return [head] + lines, bad


def main(argv):
    root = "--root" in argv
    any_bad = False
    for arg in (a for a in argv if a != "--root"):
        # The label may hold "=" (FGBPF_FORCE_FALLBACK=all); the path is after the last.
        label, _, path = arg.rpartition("=")
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            print(f"{label}: no log ({e}): a failure")
            any_bad = True
            continue
        lines, bad = summarize(label, text, root)
        print("\n".join(lines))
        any_bad |= bad
    return 1 if any_bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
