"""``coord ingest``: data pushed into a 0.39 root through its push source (``ingest.push``),
by the pull's steps. Every answer is computed apart from the ingest path: the records by
pyarrow's own readers or written out by hand, the chain by ``store.read`` and the folder by
``store.verify.verify_folder`` (which rehashes every file).
"""
from __future__ import annotations

import json
import subprocess
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.metadata.manifest import parse_manifest
from coordinator.store.append import CRASH_POINTS
from coordinator.store.dataset import CurrentDataset
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..support.cli import ROOT, coord, coord_command, coord_env
from ..support.push import HIGH_SCORES, LEADERBOARD, TEMPS, push_source, root_manifest
from ..support.push import PLAYER_SCORES as NAME
from ..support.push import SCORE_COLUMNS as COLUMNS
from ..support.push import scores as ndjson


@pytest.fixture
def home(tmp_path) -> Path:
    coord("init", "--odf", "0.39", ".", cwd=tmp_path)
    coord("add", str(LEADERBOARD / "player-scores.yaml"), cwd=tmp_path)
    return tmp_path


def dataset(home: Path, name: str = NAME) -> CurrentDataset:
    return CurrentDataset(Workspace.open(home), name)


def kinds(ds: CurrentDataset) -> list[str]:
    return [type(b.block.event).__name__ for b in ds.state().blocks]


def stored(ds: CurrentDataset, columns=COLUMNS) -> list[dict]:
    """Every slice's records, in chain order, as pyarrow reads the files."""
    tables = [pq.read_table(ds.data_file(r.slice), columns=list(columns)) for r in ds.state().slices]
    return pa.concat_tables(tables).to_pylist() if tables else []


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def root(home: Path, name: str, manifest: str) -> None:
    (home / f"{name}.yaml").write_text(manifest)
    coord("add", str(home / f"{name}.yaml"), cwd=home)


def error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# --- add ----------------------------------------------------------------------------------------


def test_add_keeps_the_reference_push_source_as_written(home):
    path = LEADERBOARD / "player-scores.yaml"
    written = parse_manifest(path.read_text(), str(path), adapt=False).content
    ds = dataset(home)
    assert [b.block.event for b in ds.state().blocks[1:]] == written.metadata
    assert kinds(ds) == ["Seed", "AddPushSource", "SetVocab"]
    assert [s.source_name for s in ds.state().push_sources] == ["default"]


def test_a_0_18_workspace_refuses_a_push_source_in_one_line(tmp_path):
    coord("init", ".", "--odf", "0.18", cwd=tmp_path)
    refused = coord("add", str(LEADERBOARD / "player-scores.yaml"), cwd=tmp_path, check=False)
    assert error_line(refused) == (
        "coord: error: dataset player-scores: an ODF 0.18 dataset has no push sources; make a "
        "0.39 workspace (coord init --odf 0.39) or upgrade the 0.18 datasets first (coord upgrade)")


def test_a_pull_of_a_push_fed_root_says_it_is_fed_by_push(home):
    out = coord("pull", NAME, cwd=home).stdout
    assert out.strip() == f"{NAME}: up to date (fed by push sources: coord ingest)"


def test_a_push_fed_root_has_nothing_to_poll_so_status_says_up_to_date(home):
    lines = coord("status", cwd=home).stdout.splitlines()
    assert lines[1].split() == [NAME, "root", "up", "to", "date"]


# --- ingest -------------------------------------------------------------------------------------


def test_each_file_is_one_add_data_with_the_files_records(home):
    files = [LEADERBOARD / "data" / f"{n}.ndjson" for n in (1, 2, 3)]
    for f in files:
        coord("ingest", NAME, str(f), cwd=home)
    ds = dataset(home)
    assert kinds(ds)[3:] == ["SetDataSchema", "AddData", "AddData", "AddData"]
    assert stored(ds) == ndjson(*files)
    assert ds.state().watermark == datetime(2000, 1, 3, tzinfo=UTC)
    assert verify_folder(ds.root) == []


def test_a_ledger_push_of_records_already_held_commits_nothing(home):
    first = str(LEADERBOARD / "data" / "1.ndjson")
    coord("ingest", NAME, first, cwd=home)
    blocks = len(dataset(home).state().blocks)
    out = coord("ingest", NAME, first, cwd=home).stdout
    assert out.strip() == f"{NAME}: up to date" and len(dataset(home).state().blocks) == blocks


def test_several_files_in_one_command_are_one_block_each(home):
    files = [str(LEADERBOARD / "data" / f"{n}.ndjson") for n in (1, 2)]
    out = coord("ingest", NAME, *files, cwd=home).stdout
    assert out.strip() == f"{NAME}: 4 new records in 2 blocks"
    assert [r.slice.offset_interval.end for r in dataset(home).state().slices] == [1, 3]


def test_stdin_is_ingested_as_a_file(home):
    data = (LEADERBOARD / "data" / "2.ndjson").read_bytes()
    proc = subprocess.run(coord_command(["ingest", NAME, "--stdin"]), cwd=home, env=coord_env(None),
                          input=data, capture_output=True, check=True)
    assert proc.stdout.decode().strip() == f"{NAME}: 2 new records"
    assert stored(dataset(home)) == ndjson(LEADERBOARD / "data" / "2.ndjson")


def test_input_format_reads_csv_with_the_sources_schema_and_no_header(home):
    """As the reference: another format keeps the source's schema; a CSV then has no header."""
    path = write(home / "round.csv", """\
        2000-01-04T00:00:00Z,4,Dave,75
        2000-01-04T00:00:00Z,4,Erin,65
        """)
    coord("ingest", NAME, str(path), "--input-format", "csv", cwd=home)
    want = [{"match_time": datetime(2000, 1, 4, tzinfo=UTC), "match_id": 4, "player_id": p,
             "score": s} for p, s in (("Dave", 75), ("Erin", 65))]
    assert stored(dataset(home)) == want


def test_json_and_parquet_inputs_through_input_format(home):
    records = [{"match_time": "2000-01-05T00:00:00Z", "match_id": 5, "player_id": "Finn", "score": 7}]
    write(home / "a.json", json.dumps({"scores": records}))
    when = pa.array([datetime(2000, 1, 6, tzinfo=UTC)], pa.timestamp("ms", tz="UTC"))
    table = pa.table({"match_time": when, "match_id": [6], "player_id": ["Gus"], "score": [8]})
    pq.write_table(table, home / "b.parquet")
    coord("ingest", NAME, str(home / "b.parquet"), "--input-format", "parquet", cwd=home)
    refused = coord("ingest", NAME, str(home / "a.json"), "--input-format", "json", cwd=home, check=False)
    assert "expected an array of records" in error_line(refused)  # no subPath given: the top
    write(home / "a.json", json.dumps(records))
    coord("ingest", NAME, str(home / "a.json"), "--input-format", "json", cwd=home)
    assert [r["player_id"] for r in stored(dataset(home))] == ["Gus", "Finn"]


def test_event_time_fills_records_without_one(home):
    root(home, "temps", TEMPS)
    path = write(home / "t.csv", "t\n1.5\n2.5\n")
    coord("ingest", "temps", str(path), "--event-time", "2021-03-04T05:06:07Z", cwd=home)
    rows = stored(dataset(home, "temps"), ["event_time", "t"])
    assert rows == [{"event_time": datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC), "t": t} for t in (1.5, 2.5)]
    assert dataset(home, "temps").state().watermark == datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC)


def test_several_sources_need_a_name_and_the_named_one_reads(home):
    schema = "schema: {fields: [{name: v, type: {kind: Int64}}]}"
    root(home, "two", root_manifest("two", push_source("csv", f"{{kind: Csv, header: true, {schema}}}"),
                                    push_source("json", f"{{kind: NdJson, {schema}}}")))
    path = write(home / "v.ndjson", '{"v": 3}\n{"v": 4}\n')
    assert error_line(coord("ingest", "two", str(path), cwd=home, check=False)) == (
        "coord: error: two has several push sources (csv, json); name one with --source-name")
    assert error_line(coord("ingest", "two", str(path), "--source-name", "nope", cwd=home,
                            check=False)) == (
        "coord: error: two has no push source 'nope' (its push sources: 'csv', 'json')")
    coord("ingest", "two", str(path), "--source-name", "json", cwd=home)
    assert stored(dataset(home, "two"), ["v"]) == [{"v": 3}, {"v": 4}]


def test_a_bad_record_is_one_line_naming_file_row_and_column_and_nothing_is_committed(home):
    path = write(home / "bad.ndjson", """\
        {"match_time": "2000-01-01", "match_id": 1, "player_id": "Alice", "score": 100}
        {"match_time": "2000-01-01", "match_id": "one", "player_id": "Bob", "score": 80}
        """)
    blocks = len(dataset(home).state().blocks)
    line = error_line(coord("ingest", NAME, str(path), cwd=home, check=False))
    assert str(path) in line and "match_id" in line and ("row 2" in line or ":2:" in line), line
    assert len(dataset(home).state().blocks) == blocks


def test_a_pushed_csv_with_a_column_the_schema_lacks_names_the_column_and_what_to_do(home):
    root(home, "temps", TEMPS)
    path = write(home / "temps.csv", """\
        t,unit
        21.5,C
        """)
    line = error_line(coord("ingest", "temps", str(path), cwd=home, check=False))
    assert line == (f"coord: error: {path}: the header has the column 'unit', which the dataset's "
                    "read schema (t) does not declare: remove it from the file, or declare it in "
                    "the read step's schema (coord add --replace)")
    assert kinds(dataset(home, "temps"))[-1] == "AddPushSource"  # nothing committed


def test_refusals_name_what_to_do(home, tmp_path_factory):
    data = str(LEADERBOARD / "data" / "1.ndjson")
    assert error_line(coord("ingest", "nope", data, cwd=home, check=False)).startswith(
        "coord: error: dataset nope")
    assert "give the files to ingest, or --stdin" in coord("ingest", NAME, cwd=home, check=False).stderr
    old = tmp_path_factory.mktemp("odf18")
    coord("init", ".", "--odf", "0.18", cwd=old)
    (old / "r.yaml").write_text("apiVersion: 1\nkind: DatasetSnapshot\ncontent:\n  id: r\n  source:\n"
                                "    kind: root\n    fetch: {kind: filesGlob, path: 'x/*.csv'}\n"
                                "    read: {kind: csv}\n    merge: {kind: append}\n")
    coord("add", "r.yaml", cwd=old)
    assert error_line(coord("ingest", "r", data, cwd=old, check=False)) == (
        "coord: error: r is an ODF 0.18 dataset, which has no push sources; make a 0.39 "
        "workspace (coord init --odf 0.39) or upgrade it (coord upgrade)")


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_an_ingest_killed_at_any_step_leaves_the_dataset_as_it_was_and_the_rerun_commits_once(
        home, point):
    first, second = (str(LEADERBOARD / "data" / f"{n}.ndjson") for n in (1, 2))
    coord("ingest", NAME, first, cwd=home)
    before = dataset(home).state()
    killed = coord("ingest", NAME, second, cwd=home, env={"COORD_CRASH_AT": point}, check=False)
    assert killed.returncode == -9
    after = dataset(home).state()
    assert after.head == before.head or point == "odf-head-updated"
    coord("ingest", NAME, second, cwd=home)  # a ledger: the rerun after a full commit adds nothing
    ds = dataset(home)
    assert stored(ds) == ndjson(Path(first), Path(second))
    assert kinds(ds).count("AddData") == 2 and verify_folder(ds.root) == []


def test_recursive_pulls_the_derivatives_downstream(home):
    path = write(home / "top.yaml", HIGH_SCORES)
    coord("add", str(path), cwd=home)
    files = [LEADERBOARD / "data" / f"{n}.ndjson" for n in (1, 2)]
    out = coord("ingest", "-r", NAME, *map(str, files), cwd=home, fake_engine=True).stdout
    assert "high-scores:" in out
    want = [r for r in ndjson(*files) if r["score"] >= 90]
    assert stored(dataset(home, "high-scores")) == want


# --- the reference's example --------------------------------------------------------------------


def test_the_leaderboard_examples_push_half_runs_as_the_reference_wrote_it(tmp_path):
    """``init.sh`` in a copy of ``examples/leaderboard``, through real ``coord`` processes (a
    ``coord`` on PATH that starts a fresh interpreter), then its records against the files'."""
    import shutil
    import sys

    example = tmp_path / "leaderboard"
    shutil.copytree(LEADERBOARD, example)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "coord").write_text(f'#!/bin/sh\nexec {sys.executable} -m tests.support.entry "$@"\n')
    (bin_dir / "coord").chmod(0o755)
    env = coord_env({"PATH": f"{bin_dir}:{coord_env(None)['PATH']}"})
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(["bash", "init.sh"], cwd=example, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "player-scores: 2 new records"
    ds = dataset(example)
    assert stored(ds) == ndjson(*(LEADERBOARD / "data" / f"{n}.ndjson" for n in (1, 2, 3)))
    assert kinds(ds).count("AddData") == 3 and verify_folder(ds.root) == []


def test_event_time_given_leaves_records_with_their_own_and_the_watermark_theirs(home):
    data = LEADERBOARD / "data" / "1.ndjson"
    coord("ingest", NAME, str(data), "--event-time", "2030-01-01T00:00:00Z", cwd=home)
    ds = dataset(home)
    assert stored(ds) == ndjson(data)  # 2000-01-01, as the records say
    assert ds.state().watermark == datetime(2000, 1, 1, tzinfo=UTC)


def test_ndgeojson_is_read_through_a_geojson_source(home):
    root(home, "places", root_manifest("places", push_source(
        "default", "{kind: GeoJson, schema: {fields: [{name: id, type: {kind: Int64}}, "
        "{name: name, type: {kind: String}}, {name: geometry, type: {kind: String}}]}}",
        "{kind: Ledger, primaryKey: [id]}")))
    features = [{"type": "Feature", "properties": {"id": i, "name": n},
                 "geometry": {"type": "Point", "coordinates": [i, 2 * i]}} for i, n in ((1, "a"), (2, "b"))]
    path = write(home / "p.ndgeojson", "".join(json.dumps(f) + "\n" for f in features))
    coord("ingest", "places", str(path), "--input-format", "ndgeojson", cwd=home)
    rows = stored(dataset(home, "places"), ["id", "name", "geometry"])
    assert [(r["id"], r["name"], json.loads(r["geometry"])) for r in rows] == [
        (f["properties"]["id"], f["properties"]["name"], f["geometry"]) for f in features]


def test_a_push_fed_ledger_roots_state_is_one_row_per_key(home):
    files = [LEADERBOARD / "data" / f"{n}.ndjson" for n in (1, 2, 3, 1)]  # the first file twice
    coord("ingest", NAME, *map(str, files), cwd=home)
    keys = {(r["match_id"], r["player_id"]) for r in ndjson(*files)}
    out = coord("sql", "-o", "json", "-c", f'SELECT match_id, player_id FROM "{NAME}@state"', cwd=home)
    assert {(r["match_id"], r["player_id"]) for r in json.loads(out.stdout)} == keys
    assert len(json.loads(out.stdout)) == len(keys) == 6


def test_a_snapshot_push_writes_retractions_and_corrections(home):
    """Each pushed file is a whole snapshot: compared with the one before, by hand."""
    root(home, "snap", root_manifest("snap", push_source(
        "default", "{kind: Csv, header: true, schema: {fields: [{name: id, type: {kind: Int64}}, "
        "{name: name, type: {kind: String}}]}}", "{kind: Snapshot, primaryKey: [id]}")))
    first = write(home / "a.csv", "id,name\n1,a\n2,b\n")
    second = write(home / "b.csv", "id,name\n1,A\n3,c\n")
    coord("ingest", "snap", str(first), str(second), cwd=home)
    rows = [(r["op"], r["id"], r["name"]) for r in stored(dataset(home, "snap"), ["op", "id", "name"])]
    # each slice by key, then operation type, as the reference stores a snapshot merge's
    assert rows == [(0, 1, "a"), (0, 2, "b"),  # the first snapshot: appends
                    (2, 1, "a"), (3, 1, "A"), (1, 2, "b"), (0, 3, "c")]  # 1 changed, 2 gone, 3 new
