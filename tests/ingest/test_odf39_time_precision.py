"""Timestamps in the files of a current-ODF (0.39) root, read as the reference (kamu-cli 0.265)
reads them, through ``coord pull``: stored in milliseconds, the digits below the millisecond
dropped, flooring the instant (its CSV and JSON readers parse with arrow-rs, through chrono, to
``Timestamp(ms, UTC)`` for a DDL ``TIMESTAMP``), where a 0.18 workspace refuses digits its
column cannot hold.
"""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.store.dataset import CurrentDataset
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..support.cli import coord, coord_here
from .test_pull_odf39 import NAME, csv, manifest


def stored(ds: CurrentDataset) -> pa.Table:
    return pa.concat_tables([pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices])


def workspace(home: Path, odf: str) -> Path:
    coord_here("init", "--odf", odf, ".", cwd=home)
    return home


# --- digits below the millisecond -------------------------------------------------------------


def test_digits_below_the_millisecond_are_dropped_flooring_the_instant(tmp_path):
    home = workspace(tmp_path, "0.39")
    coord_here("add", str(manifest(home)), cwd=home)  # at TIMESTAMP
    csv(home, "a.csv", [(1, "2024-01-01T10:00:00.123456Z", "Oslo"),
                        (2, "2024-01-01T10:00:00.999999999Z", "Lima"),
                        (3, "2024-01-01T12:00:00.0009+02:00", "Pune"),
                        (4, "1969-12-31T23:59:59.9995Z", "Kyiv")])
    assert "4 new records" in coord("pull", NAME, cwd=home).stdout
    ds = CurrentDataset(Workspace.open(home), NAME)
    table = stored(ds).sort_by("id")
    assert table.schema.field("at").type == pa.timestamp("ms", tz="UTC")
    assert table["at"].to_pylist() == [
        datetime(2024, 1, 1, 10, 0, 0, 123000, tzinfo=UTC),
        datetime(2024, 1, 1, 10, 0, 0, 999000, tzinfo=UTC),
        datetime(2024, 1, 1, 10, 0, 0, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),  # floored, not toward 1970
    ]
    assert verify_folder(ds.root) == []


def test_a_0_18_workspace_still_refuses_digits_its_column_cannot_hold(tmp_path):
    home = workspace(tmp_path, "0.18")
    coord_here("add", str(manifest(home)), cwd=home)  # at TIMESTAMP: microseconds
    csv(home, "a.csv", [(1, "2024-01-01T10:00:00.123456789Z", "Oslo")])
    refused = coord("pull", NAME, cwd=home, check=False)
    assert refused.returncode == 1
    assert "a.csv: row 1, column 'at': cannot read '2024-01-01T10:00:00.123456789Z' as " \
           "timestamp[us, tz=UTC]" in refused.stderr
