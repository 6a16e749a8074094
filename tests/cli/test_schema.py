"""``coord schema DS [--history] [-o json]`` and the API's ``/schema``: the schema in force
(column, type, nullability) and every version of it, checked against the slices' Parquet
schemas as pyarrow reads them. One workspace per module: a 0.39 root whose CSV gained a column,
a 0.39 root not pulled yet, and a 0.18 workspace whose root gained a column."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion
from coordinator.workspace.dataset import DatasetNotFound

from ..serve.conftest import serving
from ..support.cli_inprocess import run_coord
from ..support.manifests import csv_root_manifest
from .test_startup import HEAVY, imported_by

DECLARED = ["id BIGINT", "ts TIMESTAMP", "city STRING"]


def add_root(home: Path, name: str, schema: list[str] | None = None, folder: str = "in") -> None:
    path = home / f"{name}.yaml"
    path.write_text(csv_root_manifest(name, folder, schema))
    run_coord(home, "add", str(path))


def pull_two_files(home: Path) -> None:
    """A file, then one with a new column ``weather``, each pulled."""
    (home / "in").mkdir()
    (home / "in" / "a.csv").write_text("id,ts,city\n1,2024-01-01T00:00:00Z,Oslo\n")
    run_coord(home, "pull", "cities")
    (home / "in" / "b.csv").write_text("id,ts,city,weather\n2,2024-01-02T00:00:00Z,Lima,warm\n")
    run_coord(home, "pull", "cities")


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("odf39")
    Workspace.init(home, OdfVersion.V039)
    add_root(home, "cities")
    add_root(home, "later", DECLARED, folder="never")  # nothing to pull, here or by `coord serve`
    pull_two_files(home)
    return home


@pytest.fixture(scope="module")
def home18(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("odf18")
    Workspace.init(home)
    add_root(home, "cities")
    pull_two_files(home)
    return home


def slice_schemas(home: Path) -> list:
    ds = CurrentDataset(Workspace.open(home), "cities")
    return [pq.read_schema(ds.data_file(r.slice)) for r in ds.state().slices]


def schema_blocks(home: Path) -> list:
    state = CurrentDataset(Workspace.open(home), "cities").state()
    return [b for b in state.blocks if isinstance(b.block.event, e.SetDataSchema)]


def test_the_table_shows_each_column_of_the_schema_in_force_with_type_and_nullability(home):
    out = run_coord(home, "schema", "cities").output.splitlines()
    newest = slice_schemas(home)[-1]
    since = schema_blocks(home)[-1].block.sequence_number
    assert out[0].startswith(f"cities: the schema in force since block {since} (")
    rows = [line.split() for line in out[2:]]
    assert [r[0] for r in rows] == newest.names
    assert [r[-1] for r in rows] == ["yes" if f.nullable else "no" for f in newest]
    assert {r[0]: " ".join(r[1:-1]) for r in rows} == {
        "offset": "Int64", "op": "Int32", "system_time": "Timestamp(ms, UTC)",
        "ts": "Timestamp(ms, UTC)", "id": "Int64", "city": "String", "weather": "String"}


def test_history_lists_every_set_data_schema_with_its_block_time_and_added_columns(home):
    doc = json.loads(run_coord(home, "schema", "cities", "--history", "-o", "json").output)
    blocks = schema_blocks(home)
    first, second = slice_schemas(home)
    assert [v["sequenceNumber"] for v in doc["history"]] == [b.block.sequence_number for b in blocks]
    assert [v["block"] for v in doc["history"]] == [str(b.hash) for b in blocks]
    assert doc["history"][0]["added"] == first.names
    assert doc["history"][1]["added"] == [n for n in second.names if n not in first.names] == ["weather"]
    assert doc["inForce"] == doc["history"][-1]
    assert {c["name"]: c["nullable"] for c in doc["inForce"]["columns"]} == {
        f.name: f.nullable for f in second}


def test_history_as_a_table_says_what_each_version_changed(home):
    out = run_coord(home, "schema", "cities", "--history").output
    rows = [line.split() for line in out.splitlines()[1:3]]
    blocks = schema_blocks(home)
    assert [(r[0], r[2], " ".join(r[3:])) for r in rows] == [
        (str(blocks[0].block.sequence_number), str(blocks[0].hash), "first: 6 columns"),
        (str(blocks[1].block.sequence_number), str(blocks[1].hash), "added weather")]


def test_a_root_before_its_first_data_has_no_schema_and_its_read_schema_is_named(home):
    out = run_coord(home, "schema", "later").output
    assert out.strip() == ("later has no schema yet: it has no data (its first pull records one); "
                           "its read schema declares id BIGINT, ts TIMESTAMP, city STRING")
    doc = json.loads(run_coord(home, "schema", "later", "-o", "json", "--history").output)
    assert doc == {"dataset": "later", "odf": "0.39", "inForce": None,
                   "declaredReadSchema": DECLARED, "history": []}


def test_an_unknown_dataset_is_not_found(home):
    result = run_coord(home, "schema", "nope", ok=False)
    assert isinstance(result.exception, DatasetNotFound)


def test_a_0_18_dataset_shows_the_versions_its_slices_have_without_nullability(home18):
    doc = json.loads(run_coord(home18, "schema", "cities", "--history", "-o", "json").output)
    files = Workspace.open(home18).dataset("cities").data_files()
    first, second = (pq.read_schema(f) for f in files)
    assert doc["odf"] == "0.18"
    assert [v["added"] for v in doc["history"]] == [first.names, ["weather"]]
    assert [v["sequenceNumber"] for v in doc["history"]] == [1, 2]  # the blocks after the definition
    assert {c["nullable"] for c in doc["inForce"]["columns"]} == {None}
    assert [c["name"] for c in doc["inForce"]["columns"]] == second.names


def test_the_api_answers_the_schema_in_force_and_its_history_and_404_for_an_unknown_dataset(home):
    expected = json.loads(run_coord(home, "schema", "cities", "--history", "-o", "json").output)
    with serving(home) as served:
        answer = served.get("/api/datasets/cities/schema", params={"history": "true"}).json()
        assert answer["inForce"] == expected["inForce"]
        assert answer["history"] == expected["history"]
        assert "history" not in served.get("/api/datasets/cities/schema").json()
        missing = served.get("/api/datasets/nope/schema")
        assert missing.status_code == 404 and "nope" in missing.json()["error"]


def test_the_schema_of_a_0_39_dataset_is_read_from_its_metadata_without_arrow(home):
    assert imported_by("schema", "cities", "--history", cwd=home, watched=HEAVY) == []
