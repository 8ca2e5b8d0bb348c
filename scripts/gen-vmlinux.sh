#!/usr/bin/env bash
# Regenerates vmlinux/<arch>/vmlinux.h from the running kernel's BTF. The
# programs are CO-RE: one header per architecture serves every kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-$(uname -m)}"
mkdir -p "vmlinux/$arch"
bpftool btf dump file /sys/kernel/btf/vmlinux format c > "vmlinux/$arch/vmlinux.h.tmp"
mv "vmlinux/$arch/vmlinux.h.tmp" "vmlinux/$arch/vmlinux.h"
echo "wrote vmlinux/$arch/vmlinux.h"
