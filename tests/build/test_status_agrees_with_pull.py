"""``coord status`` and ``coord pull`` of a current-ODF (0.39) derivative agree on whether it is
behind: an input block its pull has nothing to read from (a step of the input that wrote no
record and kept its watermark) does not leave it "behind" for good."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import coord_here
from tests.support.manifests import csv_root_manifest, derivative_manifest, with_event_time

ROOT, POSITIVE, LARGE = "orders", "orders.positive", "orders.large"


def coord(home: Path, *args: str) -> str:
    return coord_here(*args, cwd=home, fake_engine=True).stdout


@pytest.fixture
def home(tmp_path) -> Path:
    coord(tmp_path, "init", "--odf", "0.39", ".")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "1.csv").write_text("ts,amount\n2026-01-01T00:00:00Z,1\n2026-01-02T00:00:00Z,2\n")
    schema = ["ts TIMESTAMP", "amount BIGINT"]
    manifests = {ROOT: csv_root_manifest(ROOT, str(tmp_path / "in"), schema=schema)}
    for name, source, query in ((POSITIVE, ROOT, f"SELECT ts, amount FROM `{ROOT}` WHERE amount > 0"),
                                (LARGE, POSITIVE, f"SELECT ts, amount FROM `{POSITIVE}` WHERE amount > 1")):
        manifests[name] = with_event_time(derivative_manifest(name, [source], query), "ts")
    for name, text in manifests.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    coord(tmp_path, "add", *(f"{name}.yaml" for name in manifests))
    coord(tmp_path, "pull", "-r", LARGE)
    return tmp_path


def test_a_step_that_wrote_nothing_does_not_leave_its_reader_behind(home):
    # a row the middle step filters out: its step commits no record and keeps its watermark
    (home / "in" / "2.csv").write_text("ts,amount\n2020-01-01T00:00:00Z,-1\n")
    coord(home, "pull", "-r", POSITIVE)

    assert coord(home, "pull", LARGE).strip() == f"{LARGE}: up to date"
    [entry] = json.loads(coord(home, "status", LARGE, "-o", "json"))
    assert entry["upToDate"] and entry["newInputBlocks"] == {}
