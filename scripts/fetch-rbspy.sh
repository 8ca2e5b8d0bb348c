#!/usr/bin/env bash
# Builds rbspy, the anchor for Ruby stacks (tests/ruby.rs), from crates.io
# into target/consumers/rbspy/ unless it is there. The build (a few
# minutes) is kept in the user's cache, outside the clone, so that later
# clones on this machine copy it. Pinned for reproducible runs.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/consumers/rbspy
version=0.55.0
[ -x "$dir/rbspy" ] && exit 0
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fgbpf/rbspy-$version"
if [ ! -x "$cache/bin/rbspy" ]; then
    echo "building rbspy $version from crates.io (once per machine)" >&2
    cargo install --quiet --locked --version "$version" --root "$cache" rbspy
fi
mkdir -p "$dir"
install -m 755 "$cache/bin/rbspy" "$dir/rbspy"
