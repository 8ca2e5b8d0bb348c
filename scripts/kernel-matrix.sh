#!/usr/bin/env bash
# Runs fgbpf's real-BPF capture tests on other kernels, each booted under
# QEMU (KVM, or TCG emulation where /dev/kvm cannot boot a stock kernel, as
# on this project's kvm-pvm machines), and prints one line per kernel:
#
#     KERNEL: N passed, M failed (where, how long)
#
# then the total wall time. docs/kernels.md has the results of a real run.
#
# Usage: sudo scripts/kernel-matrix.sh [--all | --tests=A,B | --smoke] [KERNEL[:FORCE]...]
#
#   no KERNEL    the host kernel, then Debian's 5.10 and 6.1
#   host         the running kernel: its image is not booted, the tests run
#                natively on the host (said so in its line)
#   debian-5.10  Debian 11 (bullseye)'s cloud kernel (linux-image-cloud-amd64)
#   debian-6.1   Debian 12 (bookworm)'s cloud kernel (linux-image-cloud-amd64)
#   debian-6.12  Debian 13 (trixie)'s cloud kernel (linux-image-cloud-amd64)
#                Each is fetched once from Debian's archive with apt-get
#                download through a temporary sources list (the host's apt
#                configuration is neither read nor changed) and unpacked
#                with dpkg-deb -x into the machine's cache, outside the
#                clone: ${XDG_CACHE_HOME:-~/.cache}/fgbpf/kernels/NAME
#                (FGBPF_CACHE overrides the fgbpf/ folder). Never installed.
#   PATH         any other x86-64 kernel image (a bzImage/vmlinuz). Its
#                modules are looked for beside it, in this order:
#                  DIR/../lib/modules/VERSION  (dpkg-deb -x of a package:
#                                               DIR is its boot/)
#                  DIR/modules/lib/modules/VERSION  (make modules_install
#                                               INSTALL_MOD_PATH=DIR/modules)
#                  DIR/lib/modules/VERSION
#                  DIR itself, when it holds kernel/ (the image is
#                                               lib/modules/VERSION/vmlinuz,
#                                               as Fedora's packages ship it)
#                where DIR is the image's directory. A kernel with virtio-pci,
#                fuse, virtiofs and overlayfs built in needs none. It needs
#                CONFIG_DEBUG_INFO_BTF=y like any kernel fgbpf runs on.
#   KERNEL:FORCE that kernel with FGBPF_FORCE_FALLBACK=FORCE (e.g.
#                debian-6.1:no-loop, the combination of Ubuntu 22.04's 5.15:
#                bpf_task_pt_regs without bpf_loop)
#   --all        every test binary instead of the default subset (on-CPU,
#                off-CPU, wall, unwinding, wakers, scopes, commands, Python)
#   --tests=A,B  these test binaries (tests/A.rs, tests/B.rs) instead;
#                --tests=none runs only the feature probe
#   --smoke      tests/kernels.rs only: every capture command on a known
#                workload, and the fallbacks docs/kernels.md's table names for
#                the kernel (what CI boots: scripts/test.sh)
#   --debug      the debug build (cargo build; cargo test --no-run), which
#                scripts/test.sh has built already, instead of --release
#   --run=SCRIPT also runs SCRIPT (bash, from the repository) in each
#                kernel, after the feature probe and before the tests, with
#                the results directory as its argument and REPO and FGBPF
#                set (scripts/bench/kernel_path.sh measures the BPF time
#                per sample so)
#
# How a guest runs: the host's root filesystem is shared read-only over
# virtiofs (virtiofsd, built once from crates.io into the machine's cache),
# a small initramfs (busybox, plus the kernel's own virtio/fuse/virtiofs/
# overlay modules) mounts it under a tmpfs overlay so the guest can write
# anywhere without touching the host, and runs this script again inside
# with --in-guest; results come back through a second, writable share,
# target/kernels/run/KERNEL/. The guest has 2 vCPUs and 4 GiB.
#
# Needs root and /dev/kvm (or TCG emulation, chosen where KVM cannot boot a
# stock kernel). What it needs from apt (qemu-system-x86 busybox-static
# cpio kmod jq, and libseccomp-dev libcap-ng-dev pkg-config to build
# virtiofsd) it installs when missing, as scripts/test.sh does; the tests'
# own tools are those scripts/test.sh installs. Writes under target/, /tmp
# and the machine's cache; running it again reuses the downloaded kernels,
# virtiofsd and the build.
set -euo pipefail

MEM_MB=${KM_MEM_MB:-4096}
RUN_SCRIPT=
CPUS=2
GUEST_TIMEOUT=${KM_GUEST_TIMEOUT:-2400} # seconds for one guest, boot to poweroff
TEST_TIMEOUT=${KM_TEST_TIMEOUT:-900}    # seconds for one test binary
DEFAULT_TESTS=(oncpu offcpu wall unwind wakers scope command python)
VIRTIOFSD_VERSION=1.14.0

# What fgbpf's summary says about the kernel's features: one second of
# `oncpu` and of `offcpu` over the whole system, --json; when one fails,
# again with libbpf's log (the verifier's included) in KIND.libbpf.log.
features() {
    local fgbpf=$1 out=$2 kind
    for kind in oncpu offcpu; do
        if ! "$fgbpf" $kind -d 1 --json -o /tmp/km-$kind >"$out/$kind.json" 2>"$out/$kind.stderr"; then
            FGBPF_LIBBPF_LOG=1 "$fgbpf" $kind -d 1 -o /tmp/km-$kind >/dev/null 2>"$out/$kind.libbpf.log" || true
        fi
        rm -rf /tmp/km-$kind
    done
}

# ---------------------------------------------------------------- in the guest
# Runs as PID 1 of the guest once the initramfs has switched to the shared
# root (overlaid by a tmpfs). $2 is the writable results share.
if [ "${1:-}" = --in-guest ]; then
    out=$2
    export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    mount -t proc proc /proc
    mount -t sysfs sysfs /sys
    mount -t devtmpfs devtmpfs /dev
    mkdir -p /dev/pts /dev/shm
    mount -t devpts devpts /dev/pts
    mount -t tmpfs tmpfs /dev/shm
    # Not /tmp: the root is writable already (a tmpfs over the host's),
    # and a clone under /tmp (the fresh-clone CI's /tmp/ci) and its
    # results share would be hidden under a new one.
    mount -t tmpfs tmpfs /run
    mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || true
    mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
    mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
    # The same hybrid cgroup layout as the host (v1 controllers, a named
    # systemd hierarchy, v2 at unified/), which tests/scope.rs expects.
    mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
    for c in cpu cpuacct cpuset memory devices freezer blkio pids; do
        mkdir -p /sys/fs/cgroup/$c
        mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c 2>/dev/null || rmdir /sys/fs/cgroup/$c
    done
    mkdir -p /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
    mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
    mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
    ip link set lo up 2>/dev/null || true
    hostname kernel-matrix
    # shellcheck disable=SC1091
    . "$out/env"
    cd "$REPO"
    uname -r >"$out/uname"
    {
        echo "kernel: $(uname -a)"
        echo "btf: $(ls -l /sys/kernel/btf/vmlinux 2>&1)"
        echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>&1)"
        echo "mounts:"
        cat /proc/mounts
    } >"$out/guest-env.txt"
    # What fgbpf's summary says about the kernel's features.
    features "$FGBPF" "$out"
    if [ -n "${RUN_SCRIPT:-}" ]; then
        REPO=$REPO FGBPF=$FGBPF bash "$RUN_SCRIPT" "$out" >"$out/run.log" 2>&1 || echo "--run exited $?" >>"$out/run.log"
    fi
    while read -r name bin; do
        start=$(date +%s)
        status=0
        timeout -k 10 "$TEST_TIMEOUT" "$bin" --test-threads=1 --show-output >"$out/$name.log" 2>&1 || status=$?
        echo "$name $status $(($(date +%s) - start))" >>"$out/done"
    done <"$out/tests"
    sync
    echo "kernel-matrix: guest done" >/dev/console
    echo o >/proc/sysrq-trigger
    sleep 30
    exit 0
fi

# ---------------------------------------------------------------- on the host
# All of it in one function, read whole before it runs: editing the script
# during a run cannot change the run.
main() {
cd "$(dirname "$0")/.."
repo=$PWD
kdir=$repo/target/kernels
# What is fetched or built once per machine, outside the clone.
cache=${FGBPF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fgbpf}
all=0
profile=release
kernels=()
for a in "$@"; do
    case $a in
    --all) all=1 ;;
    --tests=none) DEFAULT_TESTS=() ;;
    --tests=*) IFS=, read -r -a DEFAULT_TESTS <<<"${a#--tests=}" ;;
    --smoke) DEFAULT_TESTS=(kernels) ;;
    --debug) profile=debug ;;
    --run=*) RUN_SCRIPT=${a#--run=} ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    -*) echo "kernel-matrix: unknown option $a" >&2; exit 2 ;;
    *) kernels+=("$a") ;;
    esac
done
[ ${#kernels[@]} -gt 0 ] || kernels=(host debian-5.10 debian-6.1)

die() { echo "kernel-matrix: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root: the capture tests load BPF programs"

fmt_time() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

needs_guest=0
for k in "${kernels[@]}"; do [ "$k" = host ] || needs_guest=1; done
missing=()
command -v jq >/dev/null || missing+=(jq)
if [ $needs_guest = 1 ]; then
    command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
    { [ -x /bin/busybox ] && /bin/busybox --list | grep -qx switch_root &&
        file -L /bin/busybox 2>/dev/null | grep -q 'statically linked'; } || missing+=(busybox-static)
    command -v cpio >/dev/null || missing+=(cpio)
    command -v depmod >/dev/null || missing+=(kmod)
    command -v file >/dev/null || missing+=(file)
    if [ ! -x "$cache/virtiofsd-$VIRTIOFSD_VERSION/bin/virtiofsd" ]; then
        for p in libseccomp-dev libcap-ng-dev pkg-config; do
            dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
        done
    fi
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "kernel-matrix: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The build: fgbpf and the test binaries.
release=(--release)
[ $profile = release ] || release=()
echo "kernel-matrix: building (cargo build${release:+ --release}, cargo test${release:+ --release} --no-run)" >&2
cargo build "${release[@]}" --locked -q
mkdir -p "$kdir"
cargo test "${release[@]}" --locked --no-run --message-format=json -q >"$kdir/build.json"
fgbpf_bin=$repo/target/$profile/fgbpf
scripts/fetch-py-spy.sh
# name path, one a line, of the integration test binaries (tests/*.rs).
test_list=$kdir/tests.txt
jq -r 'select(.reason == "compiler-artifact" and .executable != null and (.target.kind | index("test")) and .target.src_path != null and (.target.src_path | test("/tests/[^/]+\\.rs$"))) | "\(.target.name) \(.executable)"' \
    "$kdir/build.json" | sort -u >"$test_list.all"
if [ $all = 1 ]; then
    cp "$test_list.all" "$test_list"
else
    : >"$test_list"
    for t in "${DEFAULT_TESTS[@]}"; do
        grep "^$t " "$test_list.all" >>"$test_list" || die "no test binary $t"
    done
fi

# Sums the `test result:` lines of the logs in $1 into "N passed, M failed".
count() {
    cat "$1"/*.log 2>/dev/null | awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
        END { printf "%d passed, %d failed", p, f }'
}

# One line per binary for docs/kernels.md: name, passed, failed, seconds, and the
# failing tests' names.
per_binary() {
    local dir=$1 name status secs
    [ -f "$dir/done" ] || : >"$dir/done"
    while read -r name status secs; do
        local res
        res=$(grep -h '^test result:' "$dir/$name.log" | tail -1 | sed 's/^test result: [a-zA-Z]*\. //; s/; finished.*//')
        [ -n "$res" ] || res="no result (exit $status)"
        local failed
        failed=$(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$dir/$name.log" | tr '\n' ' ')
        echo "  $name: $res ($(fmt_time "$secs"))${failed:+ failed: $failed}"
    done <"$dir/done"
    # Binaries that never finished (the guest timed out or died).
    while read -r name _; do
        grep -q "^$name " "$dir/done" 2>/dev/null || echo "  $name: did not finish"
    done <"$2"
}

# Whether every binary listed in $2 ran in $1 and exited 0.
all_passed() {
    local dir=$1 name st
    while read -r name _; do
        st=$(awk -v n="$name" '$1 == n { print $2 }' "$dir/done" 2>/dev/null)
        [ "$st" = 0 ] || return 1
    done <"$2"
}

# apt-get or apt-cache ($2...) against Debian's suite $1 through a
# temporary sources list and lists kept in the cache: the host's apt
# configuration is neither read nor changed.
suite_apt() {
    local suite=$1 d=$cache/apt/$1
    shift
    mkdir -p "$d/lists/partial" "$d/archives/partial"
    echo "deb http://deb.debian.org/debian $suite main" >"$d/sources.list"
    "$@" -o Dir::Etc::sourcelist="$d/sources.list" -o Dir::Etc::sourceparts=/dev/null \
        -o Dir::State::Lists="$d/lists" -o Dir::Cache="$d" -o Dir::Cache::archives="$d/archives" \
        -o APT::Sandbox::User=root
}

# A Debian cloud kernel, downloaded and unpacked once into the cache: $1
# the name (debian-5.10), $2 the suite, $3 the meta-package whose
# dependency names the kernel's package, $4 its series (5.10, 6.1, 6.12).
# Prints the image's path.
fetch_debian() {
    local name=$1 suite=$2 meta=$3 series=$4 dir=$cache/kernels/$1
    if [ ! -f "$dir/.unpacked" ]; then
        local pkg
        echo "kernel-matrix: reading Debian $suite's package lists (temporary sources list)" >&2
        suite_apt "$suite" apt-get update -qq >&2 || die "apt-get update of Debian $suite failed"
        pkg=$(suite_apt "$suite" apt-cache depends "$meta" 2>/dev/null | awk '/Depends:/ { print $2 }' |
            grep -m1 "^linux-image-${series}[.-]" || true)
        [ -n "$pkg" ] || die "Debian $suite has no $meta depending on a $series kernel"
        rm -rf "$dir"
        mkdir -p "$dir"
        echo "kernel-matrix: downloading ${pkg}-unsigned from Debian $suite" >&2
        (cd "$dir" && { suite_apt "$suite" apt-get download -q "${pkg}-unsigned" >/dev/null 2>&1 ||
            suite_apt "$suite" apt-get download -q "$pkg" >/dev/null; }) || die "downloading $pkg failed"
        dpkg-deb -x "$dir"/*.deb "$dir/root"
        rm -f "$dir"/*.deb
        touch "$dir/.unpacked"
    fi
    find "$dir/root/boot" -name 'vmlinuz-*' | head -1
}

# virtiofsd, built once per machine into the cache.
virtiofsd_bin() {
    local root=$cache/virtiofsd-$VIRTIOFSD_VERSION
    if [ ! -x "$root/bin/virtiofsd" ]; then
        echo "kernel-matrix: building virtiofsd $VIRTIOFSD_VERSION from crates.io (once per machine)" >&2
        cargo install -q --locked --root "$root" virtiofsd --version "$VIRTIOFSD_VERSION" >&2
    fi
    echo "$root/bin/virtiofsd"
}

# The version string of a bzImage (from its header), e.g. 6.1.0-56-cloud-amd64.
image_version() {
    local off
    off=$(od -An -j 526 -N 2 -t u2 "$1" | tr -d ' ')
    dd if="$1" bs=1 skip=$((off + 512)) count=200 status=none | tr '\0' '\n' | head -1 | awk '{print $1}'
}

modules_dir() {
    local image=$1 ver=$2 d
    d=$(dirname "$image")
    # usr/lib/modules: Debian 13's packages, after the /usr merge.
    for m in "$d/../lib/modules/$ver" "$d/../usr/lib/modules/$ver" "$d/modules/lib/modules/$ver" \
        "$d/lib/modules/$ver" "$d/kernel/.."; do
        [ -d "$m" ] && { realpath "$m"; return; }
    done
    # None: the modules the guest needs must be built in (make_initramfs
    # says which are missing); not a failure here, where `set -e` would end
    # the script without a word.
    return 0
}

# Builds the initramfs for a kernel: busybox, the modules needed to reach
# the shared root, and /init.
make_initramfs() {
    local image=$1 ver=$2 moddir=$3 out=$4
    local tree=$out.d
    rm -rf "$tree"
    mkdir -p "$tree"/{bin,dev,proc,sys,lower,rw,newroot,lib/modules}
    cp /bin/busybox "$tree/bin/busybox"
    : >"$tree/modules"
    if [ -n "$moddir" ]; then
        # Resolve the modules and their dependencies with kmod, on a copy
        # of the tree's index (the package ships without modules.dep).
        local base=$out.modbase
        rm -rf "$base"
        mkdir -p "$base/lib/modules"
        cp -a "$moddir" "$base/lib/modules/$ver"
        depmod -b "$base" "$ver"
        local m line
        for m in virtio_pci fuse virtiofs overlay; do
            modprobe -d "$base" -S "$ver" --show-depends "$m" 2>/dev/null || true
        done | while read -r kind line; do
            [ "$kind" = insmod ] || continue
            local ko=${line%% *} name
            name=$(basename "$ko")
            grep -qx "$name" "$tree/modules" 2>/dev/null && continue
            case $ko in
            *.xz) xz -dc "$ko" >"$tree/lib/modules/${name%.xz}"; name=${name%.xz} ;;
            *.zst) zstd -qdc "$ko" >"$tree/lib/modules/${name%.zst}"; name=${name%.zst} ;;
            *.gz) gzip -dc "$ko" >"$tree/lib/modules/${name%.gz}"; name=${name%.gz} ;;
            *) cp "$ko" "$tree/lib/modules/$name" ;;
            esac
            echo "$name" >>"$tree/modules"
        done
        rm -rf "$base"
    fi
    cat >"$tree/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() { echo "kernel-matrix init: $*"; echo o >/proc/sysrq-trigger; sleep 30; }
for m in $(cat /modules); do insmod /lib/modules/$m || fail "insmod $m"; done
sleep 1
mount -t virtiofs -o ro rootfs /lower || fail "mounting the host's root (virtiofs)"
mount -t tmpfs -o size=75% tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot || fail "overlay"
out=$(cat /out) repo=$(cat /repo)
mkdir -p /newroot$out
mount -t virtiofs results /newroot$out || fail "mounting the results share"
ip link set lo up
umount /proc /sys /dev
exec switch_root /newroot /bin/bash $repo/scripts/kernel-matrix.sh --in-guest $out
EOF
    chmod 755 "$tree/init"
    echo "$runout" >"$tree/out"
    echo "$repo" >"$tree/repo"
    (cd "$tree" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
    rm -rf "$tree"
}

# $1: the fallbacks forced (FGBPF_FORCE_FALLBACK), empty for none.
run_host() {
    local force=$1 dir=$kdir/run/host${1:++$1} start
    rm -rf "$dir"
    mkdir -p "$dir"
    start=$(date +%s)
    uname -r >"$dir/uname"
    (
        [ -z "$force" ] || export FGBPF_FORCE_FALLBACK=$force
        features "$fgbpf_bin" "$dir"
        if [ -n "$RUN_SCRIPT" ]; then
            REPO=$repo FGBPF=$fgbpf_bin bash "$RUN_SCRIPT" "$dir" >"$dir/run.log" 2>&1 || echo "--run exited $?" >>"$dir/run.log"
        fi
        while read -r name bin; do
            t0=$(date +%s)
            status=0
            (cd "$repo" && timeout -k 10 "$TEST_TIMEOUT" "$bin" --test-threads=1) >"$dir/$name.log" 2>&1 || status=$?
            echo "$name $status $(($(date +%s) - t0))" >>"$dir/done"
        done <"$test_list"
    )
    # Native runs share the machine with whatever else runs there: the load
    # at the end (1-minute average, 2 CPUs here) tells whether shares could
    # have been disturbed.
    local load
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "host${force:+ (forced: $force)} $(uname -r): $(count "$dir") (native on the host: its image is not on disk; load $load; $(fmt_time $(($(date +%s) - start))))"
    per_binary "$dir" "$test_list" >&2
    all_passed "$dir" "$test_list" || failed_any=1
}

# $1: the kernel's image; $2 its name (debian-5.10, or the version for
# a path); $3 the fallbacks forced, empty for none.
run_guest() {
    local image=$1 name=$2 force=$3 ver moddir label dir start vfsd
    pids=()
    [ -f "$image" ] || die "no kernel image $image"
    image=$(realpath "$image")
    ver=$(image_version "$image")
    [ -n "$ver" ] || die "$image: not a bzImage (no version in its header)"
    moddir=$(modules_dir "$image" "$ver")
    [ -n "$name" ] || name=$ver
    label=$name${force:++$force}
    dir=$kdir/run/$label
    runout=$dir/out
    rm -rf "$dir"
    mkdir -p "$runout"
    vfsd=$(virtiofsd_bin)
    make_initramfs "$image" "$ver" "$moddir" "$dir/initramfs.gz"
    {
        echo "REPO=$repo"
        echo "FGBPF=$fgbpf_bin"
        echo "TEST_TIMEOUT=$TEST_TIMEOUT"
        [ -z "$RUN_SCRIPT" ] || echo "RUN_SCRIPT=$(printf %q "$(realpath "$RUN_SCRIPT")")"
        echo "export HOME=/root PATH=$(printf %q "$PATH")"
        for v in PYENV_ROOT FGBPF_CONSUMERS FGBPF_FORCE_FALLBACK CI CARGO_HOME RUSTUP_HOME; do
            [ -n "${!v:-}" ] && echo "export $v=$(printf %q "${!v}")"
        done
        [ -z "$force" ] || echo "export FGBPF_FORCE_FALLBACK=$(printf %q "$force")"
        echo "export FGBPF_KERNEL_NAME=$(printf %q "$name")"
        true
    } >"$runout/env"
    cp "$test_list" "$runout/tests"
    start=$(date +%s)
    "$vfsd" --socket-path "$dir/root.sock" --shared-dir / --readonly --cache always --no-announce-submounts \
        --sandbox none --log-level error >"$dir/virtiofsd-root.log" 2>&1 &
    pids+=($!)
    # The virtiofsd daemons end with the script, however it ends.
    trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
    "$vfsd" --socket-path "$dir/out.sock" --shared-dir "$runout" --cache never \
        --sandbox none --log-level error >"$dir/virtiofsd-out.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 50); do
        [ -S "$dir/root.sock" ] && [ -S "$dir/out.sock" ] && break
        sleep 0.1
    done
    local status=0
    # The TSC as the guest's clock: an emulated guest otherwise settles on
    # the HPET, which the vDSO cannot read, and every clock_gettime of a
    # workload becomes a system call (half of a timing loop's time in the
    # kernel, which real machines do not see). QEMU's TSC follows the
    # host's clock; the watchdog that would demote it is told not to.
    local clock="clocksource=tsc tsc=reliable"
    timeout -k 10 "$GUEST_TIMEOUT" qemu-system-x86_64 "${accel[@]}" -smp "$CPUS" -m "$MEM_MB" \
        -object memory-backend-memfd,id=mem,size="${MEM_MB}M",share=on -numa node,memdev=mem \
        -chardev socket,id=root,path="$dir/root.sock" -device vhost-user-fs-pci,chardev=root,tag=rootfs \
        -chardev socket,id=out,path="$dir/out.sock" -device vhost-user-fs-pci,chardev=out,tag=results \
        -kernel "$image" -initrd "$dir/initramfs.gz" \
        -append "console=ttyS0 panic=-1 rdinit=/init quiet loglevel=${KM_LOGLEVEL:-4} $clock" \
        -nographic -no-reboot -serial "file:$dir/console.log" -monitor none \
        </dev/null >"$dir/qemu.log" 2>&1 || status=$?
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
    local took=$(($(date +%s) - start)) where="guest, $accel_name"
    [ $status = 124 ] && where="guest timed out after $(fmt_time "$GUEST_TIMEOUT")"
    if [ ! -f "$runout/uname" ]; then
        echo "$label $ver: 0 passed, 0 failed (guest did not start the tests; see $dir/console.log; $(fmt_time $took))"
        failed_any=1
        return
    fi
    echo "$label $(cat "$runout/uname"): $(count "$runout") ($where; $(fmt_time $took))"
    per_binary "$runout" "$runout/tests" >&2
    all_passed "$runout" "$runout/tests" || failed_any=1
}

# KVM where it can boot a stock kernel. A kvm-pvm host (a PVM guest itself,
# as on this project's machines) offers /dev/kvm but runs only kernels built
# as PVM guests: a distribution kernel hangs right after decompression
# there, so guests are emulated (TCG, one host thread per vCPU) instead.
# KM_ACCEL=kvm or KM_ACCEL=tcg overrides the choice.
accel_name=${KM_ACCEL:-}
if [ -z "$accel_name" ]; then
    if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then accel_name=kvm; else accel_name=tcg; fi
fi
# shellcheck disable=SC2054 # "tcg,thread=multi" is one argument
case $accel_name in
kvm) accel=(-enable-kvm -cpu host) ;;
# One host thread for both vCPUs: with a thread each (thread=multi), a
# guest crashed on 2026-11-27 with "Oops: int3" in __schedule while fgbpf
# attached sched_switch, and another stalled in the same place: the int3
# the kernel plants while it patches the tracepoint's jump, left in code
# the other vCPU had translated (QEMU 7.2's cross-modifying code under
# MTTCG; docs/kernels.md). Real CPUs serialize it.
tcg) accel=(-accel tcg,thread=single -cpu max) ;;
*) die "KM_ACCEL must be kvm or tcg" ;;
esac

total_start=$(date +%s)
failed_any=0
for arg in "${kernels[@]}"; do
    k=${arg%%:*} force=
    [ "$k" = "$arg" ] || force=${arg#*:}
    case $k in
    host) run_host "$force" ;;
    debian-5.10) run_guest "$(fetch_debian debian-5.10 bullseye linux-image-cloud-amd64 5.10)" "$k" "$force" ;;
    debian-6.1) run_guest "$(fetch_debian debian-6.1 bookworm linux-image-cloud-amd64 6.1)" "$k" "$force" ;;
    debian-6.12) run_guest "$(fetch_debian debian-6.12 trixie linux-image-cloud-amd64 6.12)" "$k" "$force" ;;
    *) run_guest "$k" "" "$force" ;;
    esac
done
echo "total: $(fmt_time $(($(date +%s) - total_start)))"
exit $failed_any
}

main "$@"
