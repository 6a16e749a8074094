"""A derivative pull through the real container runtime (Podman, network none)."""
from __future__ import annotations

import json

import pytest

from ..support.cli import coord
from .pipeline import HOURLY, expected_hourly, order_rows, write_manifests, write_orders_file
from .test_derivative_pull import records

pytestmark = pytest.mark.container


def test_a_derivative_pull_runs_in_the_container_and_records_the_image_digest(tmp_path, engine_image):
    _, digest = engine_image
    coord("init", cwd=tmp_path)
    rows = order_rows(4)
    write_orders_file(tmp_path, "2024-01-01.csv", rows)
    coord("add", str(write_manifests(tmp_path)), cwd=tmp_path)
    coord("pull", "-r", HOURLY, cwd=tmp_path, env={"COORD_ENGINE_RUNTIME": "container"})
    assert records(tmp_path, HOURLY) == expected_hourly(rows, watermark=rows[-1][0])
    newest = json.loads(coord("log", HOURLY, "-o", "json", cwd=tmp_path).stdout)[0]
    assert newest["engine"]["runtime"] == "container"
    assert newest["engine"]["imageDigest"] == digest
    assert newest["engine"]["networkIsolated"] is True


def test_verify_with_another_engine_records_its_compatibility(tmp_path, engine_image):
    coord("init", cwd=tmp_path)
    rows = order_rows(3)
    write_orders_file(tmp_path, "2024-01-01.csv", rows)
    coord("add", str(write_manifests(tmp_path)), cwd=tmp_path)
    coord("pull", "-r", HOURLY, cwd=tmp_path, env={"COORD_ENGINE_RUNTIME": "container"})

    first = coord("verify", HOURLY, "--engine", "sandbox", cwd=tmp_path).stdout
    assert "reproducibility: reproduced" in first
    assert "differs from the recorded one" in first and "recorded compatibility" in first
    newest = json.loads(coord("log", HOURLY, "-o", "json", cwd=tmp_path).stdout)[0]
    assert newest["compatibleEngine"]["runtime"] == "sandbox"

    later = coord("verify", HOURLY, cwd=tmp_path, env={"COORD_ENGINE_RUNTIME": "sandbox"}).stdout
    assert "replayed with an engine the chain records as compatible" in later
