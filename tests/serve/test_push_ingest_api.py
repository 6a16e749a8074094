"""``POST /api/datasets/DS/ingest`` on a real ``coord serve`` (a child process, real HTTP):
the body goes through the push source as ``coord ingest`` sends a file, the format from its
Content-Type, the event time from ``odf-event-time``, the source from ``?sourceName=``; the
build service then rebuilds the derivatives (the DuckDB test engine). Bad requests are 4xx
with a message, never 500. Answers are computed apart: the records by pyarrow's readers.
"""
from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.engines import ENV
from ..support.push import (
    HIGH_SCORES,
    LEADERBOARD,
    SCORE_COLUMNS,
    TEMPS,
    push_source,
    root_manifest,
    scores,
)
from .conftest import Served, add_root, init_workspace, serving

URL = "/api/datasets/{}/ingest"
NDJSON = {"Content-Type": "application/x-ndjson"}
PARQUET = {"Content-Type": "application/vnd.apache.parquet"}
CHANGES = root_manifest("changes", push_source(
    "feed", "{kind: Csv, header: true, ddlSchema: ['op INT', 'id BIGINT', 'city STRING']}",
    "{kind: ChangelogStream, primaryKey: [id]}"))


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


# player-scores' records, the second in the year 20000 (which Python's datetime cannot hold)
YEAR_20000 = parquet_bytes(pa.table({
    "match_time": pa.array([946684800 * 10**6, 568971820800 * 10**6], pa.timestamp("us", "UTC")),
    "match_id": [1, 2], "player_id": ["A", "B"], "score": [1, 2]}))


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    """A workspace with a 0.18 root, the reference's player-scores, a derivative over it and a
    second push root, served with writes allowed."""
    home = init_workspace(tmp_path_factory.mktemp("push"))
    add_root(home, "old", "old-in")
    coord("config", "set", "odf", "0.39", cwd=home)
    shutil.copy(LEADERBOARD / "player-scores.yaml", home)
    for name, text in (("high-scores", HIGH_SCORES), ("temps", TEMPS), ("changes", CHANGES)):
        (home / f"{name}.yaml").write_text(text)
    coord("add", "player-scores.yaml", "high-scores.yaml", "temps.yaml", "changes.yaml", cwd=home)
    with serving(home, "--allow-writes", env={ENV: "fake"}) as s:
        yield s


def records(home: Path, name: str, columns: list[str]) -> list[dict]:
    ds = CurrentDataset(Workspace.open(home), name)
    tables = [pq.read_table(ds.data_file(r.slice), columns=columns) for r in ds.state().slices]
    return pa.concat_tables(tables).to_pylist() if tables else []


def test_a_posted_file_is_one_block_and_the_derivative_is_rebuilt(served):
    files = [LEADERBOARD / "data" / f"{n}.ndjson" for n in (1, 2)]
    for f in files:
        r = served.post(URL.format("player-scores"), content=f.read_bytes(), headers=NDJSON)
        assert r.status_code == 200, r.text
        assert r.json()["records"] == 2 and len(r.json()["blocks"]) == 1
    assert records(served.home, "player-scores", SCORE_COLUMNS) == scores(*files)
    want = [r for r in scores(*files) if r["score"] >= 90]
    served.wait_for(lambda: served.dataset("high-scores")["records"] == len(want),
                    what="high-scores rebuilt")
    assert records(served.home, "high-scores", SCORE_COLUMNS) == want


def test_the_event_time_header_and_the_source_name_parameter(served):
    r = served.post(URL.format("temps"), params={"sourceName": "sensor"}, content=b"t\n1.5\n2.5\n",
                    headers={"Content-Type": "text/csv", "odf-event-time": "2021-03-04T05:06:07Z"})
    assert r.status_code == 200, r.text
    when = datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert records(served.home, "temps", ["event_time", "t"]) == [
        {"event_time": when, "t": 1.5}, {"event_time": when, "t": 2.5}]


@pytest.mark.parametrize(("dataset", "body", "headers", "params", "status", "message"), [
    ("nope", b"{}", NDJSON, {}, 404, "dataset nope does not exist in this workspace"),
    ("old", b"{}", NDJSON, {}, 400, "old is an ODF 0.18 dataset, which has no push sources; make a "
     "0.39 workspace (coord init --odf 0.39) or upgrade it (coord upgrade)"),
    ("high-scores", b"{}", NDJSON, {}, 400, "high-scores is a derivative: data is pushed into "
     "root datasets only"),
    ("player-scores", b"{}", {"Content-Type": "text/x-foo"}, {}, 415, "unsupported media type"),
    ("player-scores", b"{}", {**NDJSON, "odf-event-time": "yesterday"}, {}, 400,
     "not an RFC 3339 timestamp: 'yesterday'"),
    ("player-scores", b"{}", NDJSON, {"sourceName": "x"}, 400,
     "player-scores has no push source 'x' (its push sources: 'default')"),
    ("player-scores", b'{"match_time": "2000-01-09", "match_id": "nine", "player_id": "Z", '
     b'"score": 1}\n', NDJSON, {}, 400, "the request's body:1:"),
    ("player-scores", b'{"match_time": "9999-12-31T00:00:00Z", "match_id": 9, "player_id": "Z", '
     b'"score": 1}\n', NDJSON, {}, 400, "the request's body: row 1: event time 'match_time' "
     "9999-12-31T00:00:00Z is more than 1 day ahead of the clock"),
    ("player-scores", YEAR_20000, PARQUET, {}, 400, "the request's body: row 2: column "
     "'match_time': 20000-01-01 00:00:00.000Z is out of range: times must lie in the years 1 "
     "to 9999"),
])
def test_bad_requests_are_4xx_with_a_message_and_commit_nothing(served, dataset, body, headers,
                                                               params, status, message):
    before = served.dataset("player-scores")["head"]
    r = served.post(URL.format(dataset), content=body, headers=headers, params=params)
    assert r.status_code == status, r.text
    assert r.json()["error"].startswith(message) or message in r.json()["error"], r.text
    assert served.dataset("player-scores")["head"] == before


def test_a_read_only_service_refuses_a_push(tmp_path):
    home = init_workspace(tmp_path)
    with serving(home) as s:
        r = s.post(URL.format("any"), content=b"{}", headers=NDJSON)
        assert r.status_code == 403 and "--allow-writes" in r.json()["error"]


def test_a_changelog_retraction_of_a_key_not_held_is_a_400_and_commits_nothing(served):
    r = served.post(URL.format("changes"), content=b"op,id,city\n0,1,Oslo\n",
                    headers={"Content-Type": "text/csv"})
    assert r.status_code == 200, r.text
    before = served.dataset("changes")["head"]
    r = served.post(URL.format("changes"), content=b"op,id,city\n1,1,Oslo\n1,9,Nowhere\n",
                    headers={"Content-Type": "text/csv"})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == ("the request's body: row 2: retracts the record of key {'id': 9}, "
                                 "which the dataset does not hold at that point")
    assert served.dataset("changes")["head"] == before
