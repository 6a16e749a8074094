"""The reference's current manifest form gives a ``Timestamp`` without a unit or timezone in
milliseconds and UTC, a ``Time`` without a unit in milliseconds (kamu-cli 0.263 on), whether
written short (``type: Time``) or long (``type: {kind: Time}``): a 0.39 root reads them so. A
``Duration`` is refused at ``coord add``: no slice can hold one.
"""
from __future__ import annotations

from datetime import UTC, datetime, time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..support.cli import coord, coord_here


def stored(ds: CurrentDataset) -> pa.Table:
    return pa.concat_tables([pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices])


def workspace(home: Path, odf: str) -> Path:
    coord_here("init", "--odf", odf, ".", cwd=home)
    return home


SHIFTS = """\
kind: DatasetSnapshot
version: 1
content:
  name: shifts
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{kind: FilesGlob, path: "in/*.csv"}}
      read: {{kind: Csv, header: true, schema: {{fields: [{fields}]}}}}
      merge: {{kind: Append}}
    - {{kind: SetVocab, eventTimeColumn: at}}
"""


def shifts(home: Path, *fields: str) -> Path:
    """A root in the reference's current form reading ``in/*.csv`` with ``fields``."""
    path = home / "shifts.yaml"
    path.write_text(SHIFTS.format(fields=", ".join(fields)))
    return path


@pytest.mark.parametrize("written", ["short", "long"])
def test_a_timestamp_and_a_time_without_a_unit_are_milliseconds_the_timestamp_in_utc(tmp_path, written):
    home = workspace(tmp_path, "0.39")
    kinds = ("Timestamp", "Time") if written == "short" else ("{kind: Timestamp}", "{kind: Time}")
    coord_here("add", str(shifts(home, "{name: id, type: Int64}", f"{{name: at, type: {kinds[0]}}}",
                                 f"{{name: starts, type: {kinds[1]}}}")), cwd=home)
    path = home / "in" / "a.csv"
    path.parent.mkdir()
    path.write_text("id,at,starts\n1,2024-01-01T10:00:00.123456Z,08:30:00.250\n"
                    "2,2024-01-01T11:00:00+01:00,17:00\n")
    coord("pull", "shifts", cwd=home)

    lines = coord("schema", "shifts", cwd=home).stdout.splitlines()
    assert [line.split()[:2] for line in lines[-2:]] == [["id", "Int64"], ["starts", "Time(ms)"]]
    assert lines[-3].split()[:3] == ["at", "Timestamp(ms,", "UTC)"]
    ds = CurrentDataset(Workspace.open(home), "shifts")
    table = stored(ds)
    assert table.schema.field("starts").type == pa.time32("ms")
    assert table.select(["id", "at", "starts"]).sort_by("id").to_pylist() == [
        {"id": 1, "at": datetime(2024, 1, 1, 10, 0, 0, 123000, tzinfo=UTC), "starts": time(8, 30, 0, 250000)},
        {"id": 2, "at": datetime(2024, 1, 1, 10, 0, tzinfo=UTC), "starts": time(17, 0)},
    ]
    assert "08:30:00.250000" in coord("tail", "shifts", cwd=home).stdout
    assert verify_folder(ds.root) == []


def test_a_duration_is_refused_at_add_naming_its_unit_in_milliseconds(tmp_path):
    home = workspace(tmp_path, "0.39")
    path = shifts(home, "{name: at, type: Timestamp}", "{name: wait, type: Duration}")
    refused = coord("add", str(path), cwd=home, check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip() == (
        f"coord: error: {path}: content.metadata[0].read.schema.fields[1].type: the data type "
        "Duration(ms) is not supported by coord yet (no data slice can hold a duration: the "
        "reference's logical hash has no encoding for one, nor its CSV reader a way to read "
        "one; declare the column Int64, a count of its unit)")
