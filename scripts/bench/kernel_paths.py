"""Section 20: the BPF time per on-CPU sample of each kernel's path, read
from the kernel's own account in emulated guests (scripts/kernel-matrix.sh
--run=scripts/bench/kernel_path.sh). Under TCG every instruction is
emulated, so only ratios between the guests mean anything: Debian 11's
5.10 (the tail-call walker, registers read off the kernel stack) and
Debian 12's 6.1 with bpf_loop forced off (the tail-call walker) against
6.1's own path (the bpf_loop walker)."""

import json
import subprocess

from sections import ROOT

KERNELS = ["debian-6.1", "debian-5.10", "debian-6.1:no-loop"]


def measure(rounds, tmp):
    runs = {k: [] for k in KERNELS}
    for _ in range(rounds):
        subprocess.run(["scripts/kernel-matrix.sh", "--tests=none", "--run=scripts/bench/kernel_path.sh", *KERNELS],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        for k in KERNELS:
            label = k.replace(":", "+")
            path = ROOT / "target/kernels/run" / label / "out/kernel-path.json"
            runs[k].append(json.loads(path.read_text()))
    return runs


def report(runs):
    def per_sample(k):
        values = sorted(r["ns_per_sample"] for r in runs[k] if r["ns_per_sample"])
        return values[len(values) // 2] if values else None

    base = per_sample("debian-6.1")
    L = ["## 20. Kernel paths: BPF time per sample, by kernel\n",
         "`scripts/bench.sh --only kernel-paths`: `fgbpf oncpu -F 999 -p PID -d 10` on `plain.c`'s 10-deep chain "
         "(gcc -O2, walked by `.eh_frame` tables) in each kernel booted by `scripts/kernel-matrix.sh`, the "
         "sampler's run time and run count from the kernel (`kernel.bpf_stats_enabled`; a tail-called walker's "
         f"time counts in the sampler that started it), median of {len(next(iter(runs.values())))} runs. The guests "
         "are emulated (TCG) on this machine, so the times are not a real machine's: compare the ratios.\n",
         "| kernel | path | samples | BPF time per sample (emulated) | against 6.1's bpf_loop path | user stacks |",
         "|---|---|---|---|---|---|"]
    paths = {"debian-6.1": "bpf_loop walker", "debian-5.10": "tail calls, registers off the kernel stack, preallocated maps",
             "debian-6.1:no-loop": "tail calls (bpf_loop forced off)"}
    for k in KERNELS:
        last = runs[k][-1]
        ns = per_sample(k)
        ratio = f"{ns / base:.2f}x" if ns and base else "-"
        L.append(f"| {k} | {paths[k]} | {last['samples']} | {ns / 1000:.1f} µs | {ratio} | {last['unwound']} |"
                 if ns else f"| {k} | {paths[k]} | {last['samples']} | - | - | {last['unwound']} |")
    L.append("")
    return L
