"""Times a root refuses at ingest (``ingest.bounds``), through ``coord pull`` in both workspace
formats and ``coord ingest``: an event time more than ``ingest.eventTimeHorizon`` (one day by
default) ahead of the clock, which would hold the watermark there for good, and a time outside
the years 1 to 9999, which no reader of the slice could show. Each is one line naming the
file, the row and the column, and nothing of the file is stored; what is stored stays readable
by ``coord tail`` and ``coord sql``. Times ahead are computed from the clock when the test runs,
days apart from the horizon, so a slow machine cannot move them across it.
"""
from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..metadata.test_manifest_current import root as current_root
from ..support.cli import coord
from ..support.push import LEADERBOARD, PLAYER_SCORES

FORMATS = ["0.18", "0.39"]
NAME = "stamps"
BEYOND = ("is more than 1 day ahead of the clock; it would hold the watermark there and make "
          "every later record late (correct the time, or allow more with coord config set "
          "ingest.eventTimeHorizon)")
OUT_OF_RANGE = "is out of range: times must lie in the years 1 to 9999"


def workspace(tmp_path: Path, odf: str, fetch: str = "{kind: FilesGlob, path: 'in/*.csv'}",
              read: str = "{kind: Csv, header: true, ddlSchema: ['at TIMESTAMP', 'v BIGINT']}",
              vocab: str = "    - {kind: SetVocab, eventTimeColumn: at}\n") -> Path:
    coord("init", "--odf", odf, ".", cwd=tmp_path)
    coord("add", str(current_root(tmp_path, NAME, fetch=fetch, read=read, more=vocab)),
          cwd=tmp_path)
    (tmp_path / "in").mkdir()
    return tmp_path


def ahead(days: float) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


def stored(home: Path) -> list[dict]:
    """The dataset's records as ``coord sql`` reads them (which fails if one cannot be read)."""
    out = coord("sql", "-o", "json", "-c", f'SELECT "at", v FROM "{NAME}" ORDER BY v', cwd=home)
    return json.loads(out.stdout)


@pytest.mark.parametrize("odf", FORMATS)
def test_a_record_dated_beyond_the_horizon_is_refused_naming_the_file_and_row(tmp_path, odf):
    home = workspace(tmp_path, odf)
    (home / "in" / "1.csv").write_text("at,v\n2020-01-01T00:00:00Z,1\n")
    coord("pull", NAME, cwd=home)
    (home / "in" / "2.csv").write_text("at,v\n2020-01-02T00:00:00Z,2\n9999-12-31T00:00:00Z,3\n")
    refused = coord("pull", NAME, cwd=home, check=False)
    assert error_line(refused) == (f"coord: error: {NAME}: 2.csv: row 2: event time 'at' "
                                   f"9999-12-31T00:00:00Z {BEYOND}")
    assert [r["v"] for r in stored(home)] == [1]


@pytest.mark.parametrize("odf", FORMATS)
def test_the_horizon_is_the_ingest_event_time_horizon_setting(tmp_path, odf):
    home = workspace(tmp_path, odf)
    (home / "in" / "1.csv").write_text(f"at,v\n{ahead(3)},1\n")
    assert "more than 1 day ahead" in error_line(coord("pull", NAME, cwd=home, check=False))
    coord("config", "set", "ingest.eventTimeHorizon", "7d", cwd=home)
    coord("pull", NAME, cwd=home)
    assert [r["v"] for r in stored(home)] == [1]
    (home / "in" / "2.csv").write_text(f"at,v\n{ahead(9)},2\n")
    assert "more than 7 days ahead" in error_line(coord("pull", NAME, cwd=home, check=False))


@pytest.mark.parametrize("odf", FORMATS)
def test_an_event_time_from_the_path_beyond_the_horizon_is_refused(tmp_path, odf):
    home = workspace(tmp_path, odf, fetch="{kind: FilesGlob, path: 'in/*.csv', eventTime: "
                     "{kind: FromPath, pattern: '(\\d{4}-\\d\\d-\\d\\d)\\.csv'}}",
                     read="{kind: Csv, header: true, ddlSchema: ['v BIGINT']}", vocab="")
    (home / "in" / "9999-12-31.csv").write_text("v\n1\n")
    refused = coord("pull", NAME, cwd=home, check=False)
    assert error_line(refused) == (f"coord: error: {NAME}: 9999-12-31.csv: the event time given "
                                   f"for its records, 9999-12-31T00:00:00Z, {BEYOND}")


def parquet(path: Path, at: list[int], due: list[int]) -> Path:
    """Records with event times ``at`` and times ``due`` (microseconds since 1970, any range)."""
    pq.write_table(pa.table({"at": pa.array(at, pa.timestamp("us", tz="UTC")),
                             "due": pa.array(due, pa.timestamp("us", tz="UTC")),
                             "v": list(range(1, len(at) + 1))}), path)
    return path


JAN_2020 = 1577836800 * 10**6
YEAR_20000 = 568971820800 * 10**6  # 20000-01-01
YEAR_0 = -62167219200 * 10**6  # 0000-01-01


@pytest.mark.parametrize("odf", FORMATS)
@pytest.mark.parametrize("due, shown", [(YEAR_20000, "20000-01-01 00:00:00.000000Z"),
                                        (YEAR_0, "0000-01-01 00:00:00.000000Z")])
def test_a_time_outside_the_years_1_to_9999_is_refused_and_the_dataset_stays_readable(
        tmp_path, odf, due, shown):
    home = workspace(tmp_path, odf, fetch="{kind: FilesGlob, path: 'in/*.parquet'}",
                     read="{kind: Parquet}")
    parquet(home / "in" / "1.parquet", [JAN_2020], [JAN_2020])
    coord("pull", NAME, cwd=home)
    parquet(home / "in" / "2.parquet", [JAN_2020, JAN_2020], [JAN_2020, due])
    refused = coord("pull", NAME, cwd=home, check=False)
    assert error_line(refused) == f"coord: error: {NAME}: 2.parquet: row 2: column 'due': {shown} " \
        f"{OUT_OF_RANGE}"
    assert [r["v"] for r in stored(home)] == [1]
    coord("tail", NAME, cwd=home)  # fails if a stored time cannot be shown


# --- push (0.39) ---------------------------------------------------------------------------------


@pytest.fixture
def pushed(tmp_path) -> Path:
    coord("init", "--odf", "0.39", ".", cwd=tmp_path)
    coord("add", str(LEADERBOARD / "player-scores.yaml"), cwd=tmp_path)
    return tmp_path


def test_a_pushed_record_beyond_the_horizon_is_refused_and_the_watermark_stays(pushed):
    bad = pushed / "late.ndjson"
    bad.write_text('{"match_time": "2000-01-01T00:00:00Z", "match_id": 1, "player_id": "A", '
                   '"score": 1}\n{"match_time": "9999-12-31T00:00:00Z", "match_id": 1, '
                   '"player_id": "B", "score": 2}\n')
    refused = coord("ingest", PLAYER_SCORES, str(bad), cwd=pushed, check=False)
    assert error_line(refused) == (f"coord: error: {bad}: row 2: event time 'match_time' "
                                   f"9999-12-31T00:00:00Z {BEYOND}")
    coord("ingest", PLAYER_SCORES, str(LEADERBOARD / "data" / "1.ndjson"), cwd=pushed)
    state = CurrentDataset(Workspace.open(pushed), PLAYER_SCORES).state()
    assert state.watermark == datetime(2000, 1, 1, tzinfo=UTC)  # the genuine records'


def test_a_pushed_event_time_beyond_the_horizon_is_refused(pushed):
    (pushed / "temps.yaml").write_text(
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: temps\n  kind: Root\n  metadata:\n"
        "    - kind: AddPushSource\n      sourceName: s\n      read: {kind: Csv, header: true, "
        "schema: {fields: [{name: t, type: {kind: Float64}}]}}\n      merge: {kind: Append}\n")
    coord("add", "temps.yaml", cwd=pushed)
    data = pushed / "t.csv"
    data.write_text("t\n1.5\n")
    refused = coord("ingest", "temps", str(data), "--event-time", "9999-12-31T00:00:00Z",
                    cwd=pushed, check=False)
    assert error_line(refused) == (f"coord: error: {data}: the event time given for its records, "
                                   f"9999-12-31T00:00:00Z, {BEYOND}")


def test_a_pushed_time_beyond_year_9999_is_refused(pushed):
    table = pa.table({"match_time": pa.array([JAN_2020, YEAR_20000], pa.timestamp("us", "UTC")),
                      "match_id": [1, 2], "player_id": ["A", "B"], "score": [1, 2]})
    path = pushed / "far.parquet"
    pq.write_table(table, path)
    refused = coord("ingest", PLAYER_SCORES, str(path), "--input-format", "parquet", cwd=pushed,
                    check=False)
    # read as the source's schema reads it: in milliseconds
    assert error_line(refused) == (f"coord: error: {path}: row 2: column 'match_time': "
                                   f"20000-01-01 00:00:00.000Z {OUT_OF_RANGE}")
    coord("tail", PLAYER_SCORES, cwd=pushed)  # fails if a stored time cannot be shown
