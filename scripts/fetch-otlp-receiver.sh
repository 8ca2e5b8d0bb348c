#!/usr/bin/env bash
# Installs the OTLP receiver of tests/otlp.rs: the official OpenTelemetry
# Python classes (opentelemetry-proto) and gRPC (grpcio) from PyPI, in a
# virtual environment at target/consumers/otlp/ unless it is there.
# Pinned for reproducible runs.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/consumers/otlp
[ -x "$dir/bin/python" ] && "$dir/bin/python" -c "import grpc, opentelemetry.proto" 2>/dev/null && exit 0
echo "installing the OTLP receiver (opentelemetry-proto, grpcio) from PyPI" >&2
rm -rf "$dir"
python3 -m venv "$dir"
"$dir/bin/python" -m pip install --quiet "opentelemetry-proto==1.45.2" "grpcio==1.76.0"
