"""Where the engine's sources live, and the gRPC stubs generated from proto/engine.proto.

The stubs are build products (``proto/generate.sh``, run by ``make install``); when they are
missing or older than the proto, they are generated on first use so that ``pip install -e .``
alone is enough.
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PROTO_FILE = REPO_ROOT / "proto" / "engine.proto"
ENGINE_DIR = REPO_ROOT / "engines" / "spark"  # on the engine's PYTHONPATH
ENGINE_PACKAGE = ENGINE_DIR / "odf_spark_engine"

_GENERATED = [
    REPO_ROOT / "coordinator" / "engine" / "generated" / "engine_pb2_grpc.py",
    ENGINE_PACKAGE / "generated" / "engine_pb2_grpc.py",
]


def ensure_generated() -> None:
    """Generates the stubs for the client and the engine if missing or stale."""
    proto_time = PROTO_FILE.stat().st_mtime
    if all(p.exists() and p.stat().st_mtime >= proto_time for p in _GENERATED):
        return
    subprocess.run(
        ["bash", str(REPO_ROOT / "proto" / "generate.sh")],
        check=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    importlib.invalidate_caches()


def load():
    """The client's stub modules: (engine_pb2, engine_pb2_grpc)."""
    ensure_generated()
    from .generated import engine_pb2, engine_pb2_grpc

    return engine_pb2, engine_pb2_grpc
