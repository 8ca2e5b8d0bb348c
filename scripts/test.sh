#!/usr/bin/env bash
# Installs what the build and the tests need, then runs the whole suite.
# The capture tests load real BPF programs and need root.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=PATH,CARGO_HOME,RUSTUP_HOME,CI "$0" "$@"
fi
scripts/setup.sh --deps-only

# Consumers of the pprof and speedscope exports, for tests/post.rs (and post_reports.rs):
# `go tool pprof` must load fgbpf's .pb.gz files, and speedscope's
# published file-format schema (shipped in its npm package) must accept its
# .speedscope.json files, checked with ajv-cli. Go and npm come from apt;
# the schema and the validator are cached in target/consumers/, where the
# tests look, so later runs need no network. Versions are pinned so that a
# run is reproducible. With CI=true the tests fail if any is missing.
consumers=target/consumers
missing=()
command -v go >/dev/null || missing+=(golang-go)
command -v npm >/dev/null || missing+=(npm)
# Node.js whose JavaScript frames tests/node.rs names; Ruby whose methods
# tests/ruby.rs names.
command -v node >/dev/null || missing+=(nodejs)
command -v ruby >/dev/null || missing+=(ruby)
# PHP whose functions tests/php.rs names, CLI and php-fpm, the excimer
# extension it is checked against, and cgi-fcgi to send php-fpm requests.
command -v php8.2 >/dev/null || missing+=(php-cli)
command -v php-fpm8.2 >/dev/null || missing+=(php-fpm)
[ -f /etc/php/8.2/mods-available/excimer.ini ] || missing+=(php-excimer)
command -v cgi-fcgi >/dev/null || missing+=(libfcgi-bin)
# Perl whose subs tests/perl.rs names (Debian's perl, with its headers,
# which src/runtimes/perl's test checks the layouts against), and
# Devel::NYTProf, the profiler it is checked against.
command -v perl >/dev/null || missing+=(perl)
perl -MDevel::NYTProf::Data -e1 2>/dev/null || missing+=(libdevel-nytprof-perl)
# Erlang/OTP whose JIT-compiled functions tests/beam.rs names, and eprof
# (erlang-tools), the profiler it is checked against.
command -v erl >/dev/null || missing+=(erlang-base)
compgen -G '/usr/lib/erlang/lib/tools-*/ebin/eprof.beam' >/dev/null || missing+=(erlang-tools)
# LuaJIT whose Lua functions tests/luajit.rs names: OpenResty's (Debian's
# luajit2, /usr/bin/luajit) and its library, which nginx's Lua module
# (scripts/fetch-nginx.sh) links too, with PCRE; curl, the load generator
# there.
command -v luajit >/dev/null || missing+=(luajit2)
[ -e /lib/x86_64-linux-gnu/libluajit-5.1.so.2 ] || missing+=(libluajit2-5.1-2)
[ -e /lib/x86_64-linux-gnu/libpcre.so.3 ] || missing+=(libpcre3)
command -v curl >/dev/null || missing+=(curl)
# bpftrace, which counts a USDT probe beside fgbpf events (tests/events.rs).
command -v bpftrace >/dev/null || missing+=(bpftrace)
# heaptrack, beside which fgbpf alloc's shares are checked (tests/alloc.rs),
# and zstd, which reads its files.
command -v heaptrack_print >/dev/null || missing+=(heaptrack)
# jemalloc (libjemalloc2), preloaded into the program fgbpf alloc probes in
# it (tests/alloc.rs).
[ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || missing+=(libjemalloc2)
command -v zstd >/dev/null || missing+=(zstd)
# (PHP's headers, which tests/php.rs checks the layouts against, are
# fetched per version by scripts/php-layouts.sh, which the test runs.)
# Real software to unwind, and the anchor it is checked against
# (tests/unwind.rs): Debian's own python3.11 and gcc, perf's DWARF unwinder.
command -v perf >/dev/null || missing+=(linux-perf)
command -v gcc >/dev/null || missing+=(gcc)
# gdb reads the offsets of pyenv-built CPythons from their DWARF (tests/python.rs).
command -v gdb >/dev/null || missing+=(gdb)
[ -x /usr/bin/python3.11 ] || missing+=(python3.11)
# A debuginfod server (elfutils') serving split debug files, and xz for
# MiniDebugInfo (tests/debuginfo.rs).
command -v debuginfod >/dev/null || missing+=(debuginfod)
command -v xz >/dev/null || missing+=(xz-utils)
command -v redis-server >/dev/null || missing+=(redis-server)
# A database under lock contention beside its own account of its waits
# (tests/servers.rs): Debian's PostgreSQL, with pgbench.
compgen -G '/usr/lib/postgresql/*/bin/pgbench' >/dev/null || missing+=(postgresql)
# The terminal tests/top.rs drives `fgbpf top` in.
command -v tmux >/dev/null || missing+=(tmux)
command -v chromium >/dev/null || missing+=(chromium)
# A live HotSpot JVM whose layout and frames src/runtimes/java reads (tests/java_layout.rs).
{ command -v java && command -v javac && command -v jcmd && command -v jfr; } >/dev/null || missing+=(openjdk-17-jdk-headless)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "test: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -f "$consumers/speedscope/file-format-schema.json" ]; then
    echo "test: fetching speedscope's file-format schema" >&2
    mkdir -p "$consumers/speedscope"
    tarball=$(cd "$consumers" && npm pack --silent speedscope@1.25.0 | tail -n 1)
    tar -xzf "$consumers/$tarball" -C "$consumers/speedscope" --strip-components=3 \
        package/dist/release/file-format-schema.json
    rm -f "$consumers/$tarball"
fi
if [ ! -x "$consumers/node_modules/.bin/ajv" ]; then
    echo "test: installing ajv-cli" >&2
    npm install --silent --no-audit --no-fund --prefix "$consumers" ajv-cli@5.0.0 >/dev/null
fi
scripts/fetch-py-spy.sh
scripts/fetch-rbspy.sh
scripts/fetch-jdks.sh
scripts/fetch-otlp-receiver.sh
scripts/fetch-nginx.sh
scripts/fetch-roots.sh
scripts/fetch-node.sh
scripts/fetch-go.sh
export FGBPF_CONSUMERS="$PWD/$consumers"

# Each run's output is kept apart in target/: the suite's, the forced
# fallbacks' rerun and the kernels booted, each closed by its own line
# (scripts/test-summary.py: passed, failed and ignored over the binaries'
# own result lines; a binary that ends without one is a failure, and so is
# an ignored test in a root run).
mkdir -p target
set +e
# --no-fail-fast: a failing binary must not hide the results of the rest.
cargo test --locked --no-fail-fast "$@" 2>&1 | tee target/test-output.log
status=${PIPESTATUS[0]}
logs=("tests=target/test-output.log")
# The kernel fallbacks (src/probe/features.rs: task state from the task,
# raw tracepoints, perf buffer, the tail-call table walker with registers
# read off the kernel stack, preallocated maps), forced on this kernel,
# under the capture tests that exercise them: off-CPU, wakers, on-CPU, the
# unwinding of plain gcc -O2 builds and distribution binaries, and every
# capture command (tests/kernels.rs), built above already. Then the
# kernels CI boots (docs/kernels.md, "Kernels booted"): Debian 11's 5.10 and
# Debian 12's 6.1, each in an emulated guest running tests/kernels.rs
# (scripts/kernel-matrix.sh --smoke), with the debug build made above.
# Both skipped when arguments select other tests.
if [ "$#" -eq 0 ]; then
    echo "test: again with FGBPF_FORCE_FALLBACK=all: offcpu wakers oncpu unwind kernels" >&2
    FGBPF_FORCE_FALLBACK=all cargo test --locked --no-fail-fast --test offcpu --test wakers --test oncpu \
        --test unwind --test kernels 2>&1 | tee target/test-fallback.log
    forced=${PIPESTATUS[0]}
    [ "$status" -ne 0 ] || status=$forced
    logs+=("fallback rerun (FGBPF_FORCE_FALLBACK=all)=target/test-fallback.log")
    echo "test: booting kernels: debian-5.10 debian-6.1 (scripts/kernel-matrix.sh --smoke --debug)" >&2
    # A guest that hangs (an emulated guest's stuck timer was seen once in
    # ~30 boots: docs/kernels.md) fails here in minutes, not at CI's limit: a smoke
    # guest takes ~1.5 min on this machine.
    KM_GUEST_TIMEOUT=${KM_GUEST_TIMEOUT:-600} KM_TEST_TIMEOUT=${KM_TEST_TIMEOUT:-420} \
        scripts/kernel-matrix.sh --smoke --debug debian-5.10 debian-6.1 2>&1 | tee target/test-kernels.log
    booted=${PIPESTATUS[0]}
    [ "$status" -ne 0 ] || status=$booted
    for run in debian-5.10 debian-6.1; do
        logs+=("kernel $run (tests/kernels.rs in a guest)=target/kernels/run/$run/out/kernels.log")
    done
fi
set -e
echo
python3 scripts/test-summary.py --root "${logs[@]}" || status=1
exit "$status"
