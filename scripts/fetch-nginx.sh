#!/usr/bin/env bash
# Fetches Debian's nginx binary, a real server whose idle master
# tests/before.rs walks, and its Lua module (libnginx-mod-http-lua, with
# the NDK module and the Lua libraries it loads at start, lua-resty-core
# and lua-resty-lrucache), whose handlers tests/luajit.rs names, into
# target/consumers/nginx/ unless they are there: the packages are
# downloaded and unpacked, never installed (installing nginx would start a
# system nginx), and kept in the user's cache, outside the clone. Their
# libraries are the machine's own (scripts/test.sh installs
# libluajit2-5.1-2, which the Lua module links).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/consumers/nginx
[ -x "$dir/nginx" ] && [ -f "$dir/modules/ngx_http_lua_module.so" ] && exit 0
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fgbpf/nginx"
packages=(nginx libnginx-mod-http-lua libnginx-mod-http-ndk lua-resty-core lua-resty-lrucache)
if [ ! -x "$cache/usr/sbin/nginx" ] || [ ! -f "$cache/usr/lib/nginx/modules/ngx_http_lua_module.so" ]; then
    echo "fetching Debian's nginx and its Lua module (once per machine)" >&2
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # apt-get download writes to the current directory.
    (cd "$tmp" && { apt-get download -qq "${packages[@]}" 2>/dev/null || { apt-get update -qq && apt-get download -qq "${packages[@]}"; }; })
    mkdir -p "$cache"
    for deb in "$tmp"/*.deb; do
        dpkg-deb -x "$deb" "$cache"
    done
fi
mkdir -p "$dir/modules" "$dir/lua"
install -m 755 "$cache/usr/sbin/nginx" "$dir/nginx"
install -m 644 "$cache/usr/lib/nginx/modules/ndk_http_module.so" "$cache/usr/lib/nginx/modules/ngx_http_lua_module.so" "$dir/modules/"
cp -r "$cache/usr/share/lua/5.1/." "$dir/lua/"
