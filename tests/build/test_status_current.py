"""``coord status`` of a current-ODF (0.39) root: its source probed as a 0.18 root's is, from
the fetch state its pulls keep beside the chain (no pull, no data file opened)."""
from __future__ import annotations

import json

import pytest

from tests.support.cli_inprocess import run_coord
from tests.support.manifests import csv_root_manifest

NAME = "orders"


@pytest.fixture
def home(tmp_path):
    run_coord(tmp_path, "init", str(tmp_path), "--odf", "0.39")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "1.csv").write_text("ts,amount\n2026-01-01T00:00:00Z,1\n2026-01-02T00:00:00Z,2\n")
    (tmp_path / "orders.yaml").write_text(csv_root_manifest(NAME, str(tmp_path / "in")))
    run_coord(tmp_path, "add", str(tmp_path / "orders.yaml"))
    return tmp_path


def status(home) -> dict:
    (entry,) = json.loads(run_coord(home, "status", NAME, "-o", "json").output)
    return entry


def test_a_root_never_pulled_names_the_files_a_pull_would_take(home):
    entry = status(home)
    assert "never pulled" in json.dumps(entry) and "1.csv" in json.dumps(entry)


def test_a_root_pulled_up_to_its_source_is_up_to_date(home):
    run_coord(home, "pull", NAME)
    assert status(home)["reasons"] == []


def test_a_new_file_in_the_source_is_a_changed_source(home):
    run_coord(home, "pull", NAME)
    (home / "in" / "2.csv").write_text("ts,amount\n2026-01-03T00:00:00Z,3\n")
    entry = status(home)
    assert "source changed" in json.dumps(entry) and "2.csv" in json.dumps(entry)
    assert "1.csv" not in json.dumps(entry)
