#!/usr/bin/env bash
# Fetches py-spy, the anchor for Python stacks (tests/python.rs and
# section 11 of BENCHMARKS.md), into target/consumers/py-spy/ unless it is
# there: its wheel from PyPI holds one static binary. Pinned for
# reproducible runs.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/consumers/py-spy
version=0.4.3
[ -x "$dir/py-spy" ] && exit 0
echo "fetching py-spy $version" >&2
mkdir -p "$dir"
python3 -m pip download --quiet --no-deps --dest "$dir" "py-spy==$version"
python3 -m zipfile -e "$dir"/py_spy-$version-*.whl "$dir/wheel"
install -m 755 "$dir/wheel/py_spy-$version.data/scripts/py-spy" "$dir/py-spy"
rm -rf "$dir/wheel" "$dir"/*.whl
