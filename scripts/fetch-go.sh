#!/usr/bin/env bash
# Fetches Debian 13's Go 1.24 toolchain (golang-1.24-go and its
# golang-1.24-src) into the user's cache, outside the clone, unless it is
# there, and points target/consumers/go1.24 at its GOROOT. tests/go.rs
# builds its labels workload with it as a user of Go 1.24 would, and checks
# fgbpf's pprof labels against Go's own CPU profile of the same process.
# The packages come through a temporary sources list: the host's apt
# configuration is neither read nor changed.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fgbpf"
dir="$cache/go/1.24"
if [ ! -x "$dir/root/usr/lib/go-1.24/bin/go" ]; then
    echo "fetching Go 1.24 from Debian 13 (once per machine)" >&2
    apt_dir="$cache/apt/trixie"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
    echo "deb http://deb.debian.org/debian trixie main" >"$apt_dir/sources.list"
    suite_apt() {
        "$@" -o Dir::Etc::sourcelist="$apt_dir/sources.list" -o Dir::Etc::sourceparts=/dev/null \
            -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir" \
            -o Dir::Cache::archives="$apt_dir/archives" -o APT::Sandbox::User=root
    }
    suite_apt apt-get update -qq
    rm -rf "$dir.part"
    mkdir -p "$dir.part"
    (cd "$dir.part" && suite_apt apt-get download -q golang-1.24-go golang-1.24-src >/dev/null)
    for deb in "$dir.part"/*.deb; do
        dpkg-deb -x "$deb" "$dir.part/root"
    done
    rm -f "$dir.part"/*.deb
    rm -rf "$dir"
    mv "$dir.part" "$dir"
fi
mkdir -p target/consumers
ln -sfn "$dir/root/usr/lib/go-1.24" target/consumers/go1.24
