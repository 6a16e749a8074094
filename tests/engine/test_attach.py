"""A command attached to a running engine works in a folder of its own there and never asks
it for what it was not started to read (coordinator/engine/attach.py). No Spark: the gRPC
channel is only opened, never used."""
from __future__ import annotations

import pytest

from coordinator.engine.attach import EngineEndpoint, attached_engine
from coordinator.engine.port import EngineError, EngineErrorKind
from coordinator.metadata.objects import EngineIdentity

IDENTITY = EngineIdentity(runtime="sandbox", version="0.1.0", spark_version="4.3.0", files_hash="ab" * 32,
                          spark_master="local[2]", network_isolated=True)


@pytest.fixture
def endpoint(tmp_path) -> EngineEndpoint:
    (tmp_path / "run").mkdir()
    (tmp_path / "data").mkdir()
    return EngineEndpoint(tmp_path / "run" / "engine.sock", tmp_path / "run", (tmp_path / "data",), IDENTITY)


def test_an_endpoint_written_is_read_back_the_same(endpoint, tmp_path):
    endpoint.write(tmp_path / "endpoint.json")
    assert EngineEndpoint.read(tmp_path / "endpoint.json") == endpoint


def test_each_attached_command_works_in_a_folder_of_its_own_removed_at_its_end(endpoint, tmp_path):
    with attached_engine(endpoint, [tmp_path / "data" / "ds"]) as first, \
            attached_engine(endpoint, [tmp_path / "data" / "ds"]) as second:
        a, b = first.workdir("execute"), second.workdir("execute")
        assert a != b and a.parent.parent == b.parent.parent == endpoint.run_dir
        assert first.identity == IDENTITY
    assert not a.exists() and not b.exists()
    assert list(endpoint.run_dir.iterdir()) == []


def test_an_input_the_engine_was_not_started_to_read_is_refused_naming_it(endpoint, tmp_path):
    with pytest.raises(EngineError, match="cannot read .*elsewhere") as refused:
        with attached_engine(endpoint, [tmp_path / "data" / "ds", tmp_path / "elsewhere"]):
            pass
    assert refused.value.kind is EngineErrorKind.UNAVAILABLE
    assert list(endpoint.run_dir.iterdir()) == []  # nothing was made for it
