"""One real sandboxed Spark engine for the whole test session (it takes 10-20 s to start).

Layout: ``engine_root/data`` holds the input slices tests write (mounted read-only into the
sandbox); ``engine_root/run`` is the engine's run folder, where checkpoints and outputs go (the
only place it may write).
"""
from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from engine_testkit import Chain

from coordinator.engine.client import EngineClient
from coordinator.engine.sandbox import start_sandbox
from coordinator.engine.settings import EngineSettings
from coordinator.metadata.objects import TransformSql


@pytest.fixture(scope="session")
def engine_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("engine")
    (root / "data").mkdir()
    (root / "run").mkdir()
    return root


@pytest.fixture(scope="session")
def sandbox_engine(engine_root):
    settings = EngineSettings(runtime="sandbox", spark_conf={"spark.driver.memory": "768m"})
    engine = start_sandbox(settings, engine_root / "run", [engine_root / "data"])
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def engine_client(sandbox_engine):
    with EngineClient(sandbox_engine.socket_path) as client:
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
        run_dir, data_dir = engine_root / "run" / name, engine_root / "data" / name
        return Chain(engine_client, run_dir, data_dir, transform, schemas)

    return make
