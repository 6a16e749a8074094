#!/usr/bin/env bash
# Generates the Python gRPC stubs for proto/engine.proto into the two packages that use them:
# the coordinator's client and the Spark engine's server. The generated folders are not
# committed; `make install` and the coordinator (on first use) run this script.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python="${PYTHON:-python3}"

for out in "$root/coordinator/engine/generated" "$root/engines/spark/odf_spark_engine/generated"; do
    mkdir -p "$out"
    "$python" -m grpc_tools.protoc -I "$here" \
        --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" "$here/engine.proto"
    # protoc writes a top-level import; the stubs live inside a package.
    sed -i 's/^import engine_pb2 as engine__pb2$/from . import engine_pb2 as engine__pb2/' \
        "$out/engine_pb2_grpc.py"
    echo '"""gRPC stubs generated from proto/engine.proto by proto/generate.sh."""' > "$out/__init__.py"
    echo '*' > "$out/.gitignore"
done
