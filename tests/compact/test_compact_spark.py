"""A derivative computed by the real Spark engine over a root that ``coord compact`` merged
between its steps: the steps after the compaction, and a verify that replays every step from
the compacted input, give what the uncompacted input gives (checked with DuckDB over copies of
the original slice files)."""
from __future__ import annotations

import json
import shutil

import duckdb
import pytest

from coordinator.store import layout
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord_here
from .test_compact import EXAMPLE, ingest

pytestmark = pytest.mark.spark


def even_by_duckdb(files: list[str]) -> list[dict]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return [dict(zip(("n", "s"), row, strict=True)) for row in con.sql(
        f"SELECT count(*), sum(k) FROM read_parquet({files!r}) WHERE k % 2 = 0").fetchall()]


def test_a_derivative_stepped_before_and_after_its_input_was_compacted_replays_from_it(tmp_path):
    coord_here("init", "--odf", "0.39", ".", cwd=tmp_path)
    (tmp_path / "in").mkdir()
    coord_here("add", str(EXAMPLE / "ev.yaml"), str(EXAMPLE / "even.yaml"), cwd=tmp_path)
    ingest(tmp_path, 0, 12)
    coord_here("pull", "even", cwd=tmp_path)
    ev = CurrentDataset(Workspace.open(tmp_path), "ev")
    shutil.copytree(ev.root / layout.DATA, tmp_path / "originals")
    coord_here("compact", "ev", cwd=tmp_path)
    assert list((ev.root / layout.DATA).iterdir()) == []
    ingest(tmp_path, 12, 3)
    coord_here("pull", "even", cwd=tmp_path)
    files = [str(tmp_path / "originals" / str(r.slice.physical_hash)) if i < 12
             else str(ev.root / layout.data_file(r.slice.physical_hash))
             for i, r in enumerate(ev.state().slices)]
    answer = json.loads(coord_here("sql", "-o", "json", "-c",
                                   "SELECT count(*) AS n, sum(k) AS s FROM even", cwd=tmp_path).stdout)
    assert answer == even_by_duckdb(files)
    report = json.loads(coord_here("verify", "even", "-o", "json", cwd=tmp_path).stdout)[0]
    assert report["ok"] and report["reproducibility"]["verdict"] == "reproduced"


def test_compacting_a_derivative_keeps_its_next_step_and_its_replay(tmp_path):
    coord_here("init", "--odf", "0.39", ".", cwd=tmp_path)
    (tmp_path / "in").mkdir()
    coord_here("add", str(EXAMPLE / "ev.yaml"), str(EXAMPLE / "even.yaml"), cwd=tmp_path)
    for first in range(0, 8, 2):
        ingest(tmp_path, first, 2)
        coord_here("pull", "even", cwd=tmp_path)
    out = json.loads(coord_here("compact", "even", "-o", "json", cwd=tmp_path).stdout)
    assert out["slices"] == 4 and out["originalsRemoved"] == 4
    ingest(tmp_path, 8, 2)
    coord_here("pull", "even", cwd=tmp_path)
    ev = CurrentDataset(Workspace.open(tmp_path), "ev")
    answer = json.loads(coord_here("sql", "-o", "json", "-c",
                                   "SELECT count(*) AS n, sum(k) AS s FROM even", cwd=tmp_path).stdout)
    assert answer == even_by_duckdb([str(ev.data_file(r.slice)) for r in ev.state().slices])
    report = json.loads(coord_here("verify", "even", "--deep", "-o", "json", cwd=tmp_path).stdout)[0]
    assert report["ok"] and report["reproducibility"]["verdict"] == "reproduced"
    assert "4 slices are read from 1 compacted file" in report["compaction"]
