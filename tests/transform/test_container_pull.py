"""A derivative pull through the real container runtime (Podman, network none), made once for
the module; a sandboxed engine verifies what it computed. That engine is the worker's shared
one (tests/support/engines.py, a real sandbox): its start is not what the verification is about."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..support import engines as test_engines
from ..support.cli import coord
from .pipeline import HOURLY, expected_hourly, order_rows, write_manifests, write_orders_file
from .test_derivative_pull import records

pytestmark = pytest.mark.container


@pytest.fixture(scope="module")
def pulled_in_container(tmp_path_factory, engine_image) -> tuple[Path, list[tuple]]:
    """A workspace whose derivative was pulled in the container, and the orders it read."""
    home = tmp_path_factory.mktemp("container-pull")
    coord("init", "--odf", "0.18", cwd=home)
    rows = order_rows(4)
    write_orders_file(home, "2024-01-01.csv", rows)
    coord("add", str(write_manifests(home)), cwd=home)
    coord("pull", "-r", HOURLY, cwd=home, env={"COORD_ENGINE_RUNTIME": "container"})
    return home, rows


def test_a_derivative_pull_runs_in_the_container_and_records_the_image_digest(pulled_in_container,
                                                                               engine_image):
    home, rows = pulled_in_container
    _, digest = engine_image
    assert records(home, HOURLY) == expected_hourly(rows, watermark=rows[-1][0])
    assert not list((home / ".coord" / "run").glob("*/lease")), "the pull removed its run folder"
    [pull] = [b for b in json.loads(coord("log", HOURLY, "-o", "json", cwd=home).stdout) if "engine" in b]
    assert pull["engine"]["runtime"] == "container"
    assert pull["engine"]["imageDigest"] == digest
    assert pull["engine"]["networkIsolated"] is True


def test_verify_with_another_engine_records_its_compatibility(pulled_in_container, shared_engine):
    home, _ = pulled_in_container
    sandbox = {test_engines.ENV: f"attach:{shared_engine}"}
    first = coord("verify", HOURLY, "--engine", "sandbox", cwd=home, env=sandbox).stdout
    assert "reproducibility: reproduced" in first
    assert "differs from the recorded one" in first and "recorded compatibility" in first
    newest = json.loads(coord("log", HOURLY, "-o", "json", cwd=home).stdout)[0]
    assert newest["compatibleEngine"]["runtime"] == "sandbox"

    later = coord("verify", HOURLY, cwd=home, env={**sandbox, "COORD_ENGINE_RUNTIME": "sandbox"}).stdout
    assert "replayed with an engine the chain records as compatible" in later
