#!/usr/bin/env bash
# Builds a Debian 13 (trixie) root with the runtime versions it ships
# (Ruby 3.3; PHP 8.4 with excimer, its reference profiler) into the user's
# cache, outside the clone, unless it is there, and points
# target/consumers/roots/trixie at it. tests/ruby.rs and tests/php.rs run
# processes in it as a container runs them (chroot): read beside rbspy and
# excimer, and named with why when fgbpf refuses them. debootstrap is
# installed from Debian's packages when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fgbpf/roots"
root="$cache/trixie"
packages=ruby3.3,php8.4-cli,php8.4-excimer
if [ ! -f "$root/.fgbpf-complete" ] || [ "$(cat "$root/.fgbpf-complete")" != "$packages" ]; then
    echo "building a Debian 13 root with $packages (once per machine, ~3 min)" >&2
    command -v debootstrap >/dev/null || {
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    }
    mkdir -p "$cache"
    rm -rf "$root.part"
    debootstrap --variant=minbase --include="$packages" trixie "$root.part" http://deb.debian.org/debian >/dev/null
    echo "$packages" > "$root.part/.fgbpf-complete"
    rm -rf "$root"
    mv "$root.part" "$root"
fi
mkdir -p target/consumers/roots
ln -sfn "$root" target/consumers/roots/trixie
