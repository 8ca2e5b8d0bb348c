#!/usr/bin/env bash
# Builds Debian roots with the runtime versions other releases ship into
# the user's cache, outside the clone, unless they are there, and points
# target/consumers/roots/SUITE at each:
# - Debian 13 (trixie): Ruby 3.3; PHP 8.4 with excimer, its reference
#   profiler; Python 3.13.
# - Debian 11 (bullseye): Ruby 2.7; PHP 7.4 with excimer; Python 3.9.
# - their OpenJDKs (11 and 21), Erlangs (OTP 23 and 27) and LuaJITs, and
#   Debian 13's whole Perl (5.40), in roots of their own.
# tests/ruby.rs, tests/php.rs and tests/python.rs run processes in them as
# a container runs them (chroot): read beside rbspy, excimer and py-spy,
# and named with why when fgbpf refuses them. debootstrap is installed
# from Debian's packages when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fgbpf/roots"

# build SUITE PACKAGES (comma-separated) [NAME: the root's, else SUITE]
build() {
    local suite=$1 packages=$2 name=${3:-$1}
    local root="$cache/$name"
    if [ ! -f "$root/.fgbpf-complete" ] || [ "$(cat "$root/.fgbpf-complete")" != "$packages" ]; then
        echo "building a Debian $suite root with $packages (once per machine, ~3 min)" >&2
        command -v debootstrap >/dev/null || {
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
        }
        mkdir -p "$cache"
        rm -rf "$root.part"
        debootstrap --variant=minbase --include="$packages" "$suite" "$root.part" http://deb.debian.org/debian >/dev/null
        echo "$packages" > "$root.part/.fgbpf-complete"
        rm -rf "$root"
        mv "$root.part" "$root"
    fi
    mkdir -p target/consumers/roots
    ln -sfn "$root" "target/consumers/roots/$name"
}

build trixie ruby3.3,php8.4-cli,php8.4-excimer,python3
build bullseye ruby,php7.4-cli,php-excimer,python3
# The releases' OpenJDKs (with jcmd and jfr, JFR being the reference),
# each in a root of its own so that the interpreters' roots stay as they
# are: Debian 11's OpenJDK 11 and Debian 13's OpenJDK 21.
build bullseye openjdk-11-jdk-headless bullseye-java
build trixie openjdk-21-jdk-headless trixie-java
# Their Erlangs: Debian 11's OTP 23 (no JIT) and Debian 13's OTP 27.
build bullseye erlang-base bullseye-erlang
build trixie erlang-base trixie-erlang
# LuaJIT: Debian 11's luajit (LuaJIT's own 2.1.0-beta3, not GC64)
# and Debian 13's (OpenResty's branch), each in a root of its own
# (tests/luajit.rs).
build bullseye luajit bullseye-luajit
build trixie luajit trixie-luajit
# Debian 13's whole perl (5.40, with its headers, which
# scripts/perl-layouts.sh reads; the trixie root has perl-base alone) and
# Devel::NYTProf, the reference tests/perl.rs reads it beside.
build trixie perl,libdevel-nytprof-perl trixie-perl
