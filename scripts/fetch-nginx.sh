#!/usr/bin/env bash
# Fetches Debian's nginx binary, a real server whose idle master
# tests/before.rs walks, into target/consumers/nginx/ unless it is there:
# the package is downloaded and unpacked, never installed (installing it
# would start a system nginx), and kept in the user's cache, outside the
# clone. Its libraries are the machine's own.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/consumers/nginx
[ -x "$dir/nginx" ] && exit 0
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fgbpf/nginx"
if [ ! -x "$cache/usr/sbin/nginx" ]; then
    echo "fetching Debian's nginx (once per machine)" >&2
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # apt-get download writes to the current directory.
    (cd "$tmp" && { apt-get download -qq nginx 2>/dev/null || { apt-get update -qq && apt-get download -qq nginx; }; })
    mkdir -p "$cache"
    dpkg-deb -x "$tmp"/nginx_*.deb "$cache"
fi
mkdir -p "$dir"
install -m 755 "$cache/usr/sbin/nginx" "$dir/nginx"
