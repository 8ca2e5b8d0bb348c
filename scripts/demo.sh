#!/usr/bin/env bash
# Quick start: installs what the build needs, builds fgbpf, and profiles
# the built-in demo workload into ./fgbpf-demo/.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
"$here/scripts/setup.sh"
if [ "$(id -u)" -ne 0 ]; then
    exec sudo "$here/target/release/fgbpf" demo "$@"
fi
exec "$here/target/release/fgbpf" demo "$@"
