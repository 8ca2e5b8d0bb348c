"""Section 19 of BENCHMARKS.md: what streaming to an OTLP receiver costs
fgbpf. `fgbpf wall` on the whole host for 30 s, against the 50/30/20
workload and a napper (tests/workloads/plain.c, gcc -O2), without OTLP,
with one export at the end (`--otlp`), and streamed each second
(`--otlp-interval 1`), to the test suite's receiver (tests/otlp/receiver.py,
the official opentelemetry-proto classes and grpcio, over gRPC on
loopback). fgbpf's own CPU and peak memory from its summary; medians of the
rounds. Also: `scripts/bench.sh --only otlp`, or run alone: `python3
scripts/bench/otlp_cost.py` (as root, after scripts/test.sh has installed
the receiver)."""

import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measures import log, own_use  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
RECEIVER = ROOT / "target" / "consumers" / "otlp" / "bin" / "python"
SECONDS = 30
MODES = [("none", []), ("once", ["--otlp-insecure"]), ("stream", ["--otlp-insecure", "--otlp-interval", "1"])]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def capture(tmp, port, extra):
    out = Path(tmp) / f"out-{time.monotonic_ns()}"
    otlp = ["--otlp", f"127.0.0.1:{port}"] if extra else []
    p = subprocess.run([str(FGBPF), "wall", "-d", str(SECONDS), "-o", str(out), *otlp, *extra],
                       capture_output=True, text=True, check=True)
    cpu, peak = own_use(p.stderr)
    sent = re.search(r"OTLP: sent ([0-9]+) of ([0-9]+) exports \(([0-9]+) profiles\)", p.stderr)
    return cpu, peak, sent.groups() if sent else None


def measure(rounds, tmp):
    plain = Path(tmp) / "plain"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(plain), str(ROOT / "tests/workloads/plain.c")], check=True)
    port = free_port()
    work = [subprocess.Popen([str(plain), w, "3600"], stdout=subprocess.DEVNULL) for w in ("split", "waits")]
    receiver = subprocess.Popen([str(RECEIVER), str(ROOT / "tests/otlp/receiver.py"), "serve", str(Path(tmp) / "received"),
                                 "--port", str(port)], stdout=subprocess.PIPE, text=True)
    rows = {name: [] for name, _ in MODES}
    try:
        assert receiver.stdout.readline().startswith("listening"), "the receiver did not start"
        for _ in range(rounds):
            for name, extra in MODES:
                rows[name].append(capture(tmp, port, extra))
                log(f"{name}: {rows[name][-1]}")
    finally:
        for p in [*work, receiver]:
            p.kill()
            p.wait()
    return rows


def report(rows):
    med = lambda vals: sorted(vals)[len(vals) // 2]
    labels = {"none": "without OTLP", "once": "`--otlp` (one export at the end)",
              "stream": "`--otlp --otlp-interval 1` (an export a second)"}
    lines = [
        "## 19. OTLP: cost of sending",
        "",
        f"`fgbpf wall` on the whole host for {SECONDS} s (the 50/30/20 workload and a napper of"
        " `tests/workloads/plain.c` running), without OTLP, with one export at the end, and streamed each second, to"
        " the test suite's receiver (the official `opentelemetry-proto` classes and `grpcio`, gRPC on loopback;"
        " `scripts/bench/otlp_cost.py`). Own CPU and peak memory from fgbpf's summary; medians of the rounds.",
        "",
        "| sending | exports sent (profiles) | fgbpf CPU | peak MB |",
        "|---|---|---|---|",
    ]
    for name, _ in MODES:
        cpu = med([r[0] for r in rows[name]])
        peak = med([r[1] for r in rows[name]])
        sent = rows[name][0][2]
        what = f"{sent[0]} of {sent[1]} ({sent[2]})" if sent else "-"
        lines.append(f"| {labels[name]} | {what} | {cpu:.2f} s | {peak} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    from sections import replace_section
    with tempfile.TemporaryDirectory() as tmp:
        replace_section("## 19. OTLP", report(measure(3, tmp)))
