"""Section 15 of BENCHMARKS.md: what naming JavaScript frames costs.

A busy Node.js script (`tests/workloads/node/busy.js` on the machine's
Node.js: `outer` -> `inner`, its main thread about 27 frames from `_start`
to `inner`, 9 of them JavaScript) is sampled by `fgbpf oncpu -F 999`, with
a second `fgbpf oncpu -F 999` attached at the same time (`-p`) to one of:

- a native program of similar depth (`tests/workloads/deep.c` built
  `gcc -O2`: 25 frames from `_start` to `leaf_burn`);
- the same script started with `--perf-basic-prof`, sampled with
  `--no-node`: its JavaScript frames named from V8's perf map instead.

Both targets run at once, one on each CPU; both samplers' programs run on
every tick of both CPUs and drop the other's samples, so the BPF time each
spends per sample it records (the kernel's own count,
`kernel.bpf_stats_enabled`) differs by what recording its target's stacks
costs. Also: fgbpf's own CPU time (reading V8's heap and naming its
frames included), from its summary.
"""

import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from java_cost import SECONDS, own_cpu, sample_pair, samples
from measures import log

ROOT = Path(__file__).resolve().parents[2]
BUSY = ROOT / "tests/workloads/node/busy.js"


def start_node(flags=()):
    # Under --perf-basic-prof Node writes isolate-*.log into its working
    # directory: give it a scratch one, not the source tree.
    scratch = Path(tempfile.mkdtemp(prefix="fgbpf-bench-node-"))
    node = subprocess.Popen(["node", *flags, str(BUSY), "600"], stdout=subprocess.PIPE, text=True, cwd=scratch)
    assert node.stdout.readline().strip() == "ready"
    return node


def named_share(folded):
    """Share of the samples whose stack holds a frame naming inner (from
    V8's heap, `inner (busy.js:4)_[j]`, or its perf map, `JS:*inner ...`)."""
    total = named = 0
    for line in Path(folded).read_text().splitlines():
        if line.startswith("#") or " " not in line:
            continue
        stack, n = line.rsplit(" ", 1)
        total += int(n)
        if re.search(r"(^|;)[^;]*\binner\b", stack):
            named += int(n)
    return named * 100.0 / total if total else 0.0


def pair(tmp, r, other, other_args):
    """fgbpf on busy.js and on `other` at once: per-sample BPF time, samples, own CPU."""
    node = start_node()
    outs = {k: tmp / f"node-{k}-{r}" for k in ("node", "other")}
    for o in outs.values():
        subprocess.run(["rm", "-rf", str(o)])
    (ns_node, ns_other), errs = sample_pair([(node, outs["node"], []), (other, outs["other"], other_args)])
    return {
        "node_ns": ns_node, "other_ns": ns_other,
        "node_samples": samples(outs["node"] / "oncpu.folded"),
        "other_samples": samples(outs["other"] / "oncpu.folded"),
        "named": named_share(outs["node"] / "oncpu.folded"),
        "other_named": named_share(outs["other"] / "oncpu.folded"),
        "node_cpu": own_cpu(errs[0]), "other_cpu": own_cpu(errs[1]),
    }


def measure(rounds, tmp):
    deep = tmp / "deep-O2-node-bench"
    subprocess.run(["gcc", "-O2", "-o", str(deep), str(ROOT / "tests/workloads/deep.c")], check=True)
    rows = {"native": [], "perfmap": []}
    for r in range(rounds):
        native = subprocess.Popen([str(deep), "1000"], stdout=subprocess.DEVNULL)
        rows["native"].append(pair(tmp, r, native, []))
        log(f"node round {r + 1}/{rounds} against native: {rows['native'][-1]}")
        mapped = start_node(["--perf-basic-prof"])
        rows["perfmap"].append(pair(tmp, r, mapped, ["--no-node"]))
        log(f"node round {r + 1}/{rounds} against --perf-basic-prof: {rows['perfmap'][-1]}")
        for f in Path("/tmp").glob(f"perf-{mapped.pid}.map"):
            f.unlink()
    return rows


def report(rows):
    per = lambda r, k: r[f"{k}_ns"] / max(r[f"{k}_samples"], 1)
    spread = lambda vals, f: f"{f(statistics.median(vals))} ({f(min(vals))}–{f(max(vals))})"
    us = lambda v: f"{v / 1000:.2f} µs"
    s = lambda v: f"{v:.2f} s"
    L = ["## 15. JavaScript frames\n", __doc__.split("\n\n", 1)[1].strip() + "\n",
         "| against | busy.js, JavaScript named from V8's heap | the other target | ratio |", "|---|---|---|---|"]
    for k, label in (("native", "deep.c, `gcc -O2`, similar depth"), ("perfmap", "busy.js with `--perf-basic-prof`, `--no-node`")):
        rs = rows[k]
        ratios = [per(r, "node") / per(r, "other") for r in rs if per(r, "other")]
        L.append(f"| {label}: BPF time per recorded sample | {spread([per(r, 'node') for r in rs], us)} "
                 f"| {spread([per(r, 'other') for r in rs], us)} | {spread(ratios, lambda v: f'{v:.2f}×')} |")
        cpu = [(r["node_cpu"], r["other_cpu"]) for r in rs if r["node_cpu"] is not None and r["other_cpu"] is not None]
        if cpu:
            L.append(f"| {label}: fgbpf's own CPU for a {SECONDS + 2} s capture | "
                     f"{spread([c[0] for c in cpu], s)} | {spread([c[1] for c in cpu], s)} | |")
    allr = rows["native"] + rows["perfmap"]
    L.append(f"\nbusy.js's samples with `inner` named from V8's heap: {spread([r['named'] for r in allr], lambda v: f'{v:.1f}%')}; "
             f"with `--perf-basic-prof` and `--no-node`: {spread([r['other_named'] for r in rows['perfmap']], lambda v: f'{v:.1f}%')}; "
             f"{len(rows['native'])} rounds.\n")
    return L
