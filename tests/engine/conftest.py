"""The engine tests speak gRPC to the session's shared sandboxed engine (tests/support/engines.py).

Layout: ``engine_root.data`` holds the input slices tests write (inside the test session's
folder, which the engine may read); ``engine_root.run`` is a folder inside the engine's run
folder, where checkpoints and outputs go (the only place it may write).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pytest
from engine_testkit import Chain

from coordinator.engine.attach import EngineEndpoint
from coordinator.engine.client import EngineClient
from coordinator.metadata.objects import TransformSql


class EngineRoot(NamedTuple):
    data: Path
    run: Path


@pytest.fixture(scope="session")
def engine_endpoint(shared_engine) -> EngineEndpoint:
    return EngineEndpoint.read(shared_engine)


@pytest.fixture(scope="session")
def engine_root(engine_endpoint, tmp_path_factory) -> EngineRoot:
    run = engine_endpoint.run_dir / "engine-tests"
    run.mkdir()
    return EngineRoot(tmp_path_factory.mktemp("engine-data"), run)


@pytest.fixture(scope="session")
def engine_client(engine_endpoint):
    with EngineClient(engine_endpoint.socket_path) as client:
        yield client


@pytest.fixture
def make_chain(engine_client, engine_root, request):
    """``make_chain(transform, schemas)`` -> a new Chain with folders of its own."""
    counter = iter(range(1000))

    def make(transform: TransformSql | str, schemas: dict[str, pa.Schema]) -> Chain:
        if isinstance(transform, str):
            transform = TransformSql(engine="spark", query=transform)
        # Plain folder names (parametrized test names carry brackets).
        name = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name) + f"-{next(counter)}"
        run_dir, data_dir = engine_root.run / name, engine_root.data / name
        return Chain(engine_client, run_dir, data_dir, transform, schemas)

    return make
