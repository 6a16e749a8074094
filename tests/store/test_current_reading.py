"""The reading commands on current-ODF (0.39) datasets, in a workspace holding both versions:
``list``/``status`` show a 0.39 dataset as a 0.18 one plus its version, ``log`` its blocks
and steps, ``tail``/``sql`` its stored table (each file checked first), ``verify`` its folder
and signers, ``lineage`` its inputs resolved to the workspace's datasets.

The datasets are written through the append path (``tests/support/odf39_datasets.py``): as
the reference writes them, without signatures. Expected answers come from the files
(pyarrow) or the fixture's own numbers, never from the code under test. The workspace is
written once for the module and copied for each test; the commands run in the test process
(``coord_here``) but for two, which run as ``coord`` processes.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from coordinator.metadata.odf39 import events as e
from coordinator.store.append import DatasetWriter
from coordinator.store.dataset import CurrentDataset, new_dataset_key
from coordinator.workspace import Workspace
from tests.repository.conftest import make_root
from tests.support.cli import coord, coord_here
from tests.support.odf39_datasets import (
    BATCHES,
    Written,
    at,
    rows,
    slice_file,
    sql,
    write_derivative,
    write_root,
)
from tests.support.tamper import flip_a_byte

OLD = "org.example.events"  # the workspace's 0.18 dataset
STORED_COLUMNS = ["offset", "op", "system_time", "event_time", "city", "population"]


@dataclass(frozen=True)
class Mixed:
    ws: Workspace
    root: Written  # "cities"
    derivative: Written  # "large-cities"

    def data(self, written: Written) -> pa.Table:
        """The records of a 0.39 dataset, read from its files here, by offset."""
        tables = [pq.read_table(written.root / "data" / str(h)) for h in written.data]
        return pa.concat_tables(tables).sort_by("offset")


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Mixed:
    home = tmp_path_factory.mktemp("mixed")
    ws = Workspace.init(home / "ws")  # a 0.18 workspace that also holds 0.39 datasets
    make_root(ws, OLD, slices=2, rows=5)
    folder = ws.meta / "datasets"
    root = write_root(folder / "cities", ws.meta / "locks", home / "scratch")
    derivative = write_derivative(folder / "large-cities", ws.meta / "locks", home / "scratch", root)
    return Mixed(ws, root, derivative)


@pytest.fixture
def mixed(written, tmp_path) -> Mixed:
    """A copy of ``written`` for one test."""
    shutil.copytree(written.ws.root, tmp_path / "ws")
    ws = Workspace.open(tmp_path / "ws")
    folder = ws.meta / "datasets"
    return Mixed(ws, replace(written.root, root=folder / "cities"),
                 replace(written.derivative, root=folder / "large-cities"))


def run_json(mixed: Mixed, *args: str):
    return json.loads(coord_here(*args, "-o", "json", cwd=mixed.ws.root).stdout)


def append_batch(mixed: Mixed) -> None:
    """A third AddData on the root (its derivative has not consumed it)."""
    table = rows([(at(0), "Lima", 10_000_000)])
    path, new_data = slice_file(table, at(40), 4, mixed.ws.root / "scratch")
    with DatasetWriter(mixed.root.root, mixed.ws.meta / "locks" / "cities.lock") as w:
        w.append(e.AddData(prev_offset=4, new_data=new_data, new_watermark=at(0)),
                 system_time=at(40), data=path)


# --- list and status ---------------------------------------------------------------------------


def test_list_shows_both_versions_with_their_odf_and_what_their_blocks_say(mixed):
    listed = {d["id"]: d for d in run_json(mixed, "list")}
    assert {i: d["odf"] for i, d in listed.items()} == {"cities": "0.39", "large-cities": "0.39", OLD: "0.18"}
    cities, large = listed["cities"], listed["large-cities"]
    records = mixed.data(mixed.root).num_rows
    assert (cities["kind"], cities["blocks"], cities["records"]) == ("root", 5, records)
    assert (large["kind"], large["blocks"], large["records"]) == ("derivative", 5, 2)
    assert cities["head"] == str(mixed.root.blocks[-1])
    assert cities["watermark"] == "2025-02-03T00:00:00Z"
    assert listed[OLD]["records"] == 10
    table = coord("list", cwd=mixed.ws.root).stdout.splitlines()
    assert table[0].split() == ["dataset", "kind", "head", "blocks", "records", "watermark", "odf", "status"]
    assert table[1].split()[:2] + table[1].split()[-3:] == ["cities", "root", "0.39", "not", "checked"]


def test_a_0_39_derivative_that_consumed_every_input_block_is_up_to_date(mixed):
    statuses = {s["id"]: s for s in run_json(mixed, "status")}
    assert statuses["large-cities"]["upToDate"] and statuses["large-cities"]["odf"] == "0.39"
    assert statuses["cities"]["reasons"] == ["notChecked"]
    assert statuses["cities"]["notChecked"] == "remote source https://example.org/cities.csv"


def test_a_0_39_derivative_is_behind_by_the_input_blocks_after_its_last_step(mixed):
    append_batch(mixed)
    status = run_json(mixed, "status", "large-cities")[0]
    assert status["reasons"] == ["newInput"] and status["newInputBlocks"] == {"cities": 1}


# --- log ---------------------------------------------------------------------------------------


def test_log_shows_the_blocks_newest_first_with_what_each_event_says(mixed):
    blocks = run_json(mixed, "log", "cities")
    assert [b["sequenceNumber"] for b in blocks] == [4, 3, 2, 1, 0]
    assert [b["hash"] for b in blocks] == [str(h) for h in reversed(mixed.root.blocks)]
    assert [b["event"] for b in blocks] == ["AddData", "AddData", "SetDataSchema", "SetPollingSource", "Seed"]
    assert blocks[0]["says"].startswith("offsets 3..4 (2 records), watermark 2025-02-03T00:00:00Z")
    assert blocks[2]["says"] == ("columns offset Int64, op Int32, system_time Timestamp, "
                                 "event_time Timestamp, city String?, population Int64?")
    assert blocks[3]["says"].startswith("fetch https://example.org/cities.csv, read ReadStepCsv")
    assert blocks[4]["says"] == f"root dataset {mixed.root.id}"
    assert {b["authorship"] for b in blocks} == {"unsigned history"}  # the reference signs nothing


def test_log_builds_shows_each_step_with_the_input_offsets_it_read(mixed):
    steps = run_json(mixed, "log", "large-cities", "--builds")
    assert [(s["sequenceNumber"], s["offsets"], s["numRecords"]) for s in steps] == [
        (4, [1, 1], 1), (3, [0, 0], 1)]
    assert [[(i["dataset"], i["offsets"]) for i in s["inputs"]] for s in steps] == [
        [("cities", [3, 4])], [("cities", [0, 2])]]
    assert steps[0]["inputs"][0]["newBlock"] == str(mixed.root.blocks[-1])


# --- tail and sql ------------------------------------------------------------------------------


def test_tail_shows_the_newest_records_by_offset(mixed):
    shown = run_json(mixed, "tail", "cities", "-n", "3")
    expected = mixed.data(mixed.root).slice(2)
    assert [r["offset"] for r in shown] == expected["offset"].to_pylist()
    assert [r["city"] for r in shown] == expected["city"].to_pylist() == ["Toronto", "Seoul", "Oslo"]
    assert list(shown[0]) == STORED_COLUMNS


def test_sql_sees_the_stored_table_beside_the_0_18_datasets(mixed):
    got = run_json(mixed, "sql", "-c", 'SELECT * FROM "large-cities" ORDER BY "offset"')
    expected = mixed.data(mixed.derivative)
    assert [r["city"] for r in got] == expected["city"].to_pylist()
    assert [r["population"] for r in got] == expected["population"].to_pylist()
    assert list(got[0]) == STORED_COLUMNS
    query = f'SELECT (SELECT count(*) FROM "cities") + (SELECT count(*) FROM "{OLD}") AS n'
    both = run_json(mixed, "sql", "-c", query)
    assert both == [{"n": 5 + 10}]


def test_the_api_s_bounded_query_reads_a_0_39_dataset_as_coord_sql_does(mixed):
    from coordinator.query.bounded import Bounds, bounded_query

    answer = json.loads(bounded_query(mixed.ws.root, 'SELECT city FROM "large-cities" ORDER BY "offset"',
                                      Bounds(max_rows=1, max_bytes=10_000, seconds=60, memory=1 << 30)))
    assert answer["rows"] == [{"city": "Toronto"}] and answer["truncatedBy"] == "limit"


def test_tail_as_at_a_0_39_block_shows_the_records_up_to_it(mixed):
    before_second_batch = str(mixed.root.blocks[3])[:12]  # a prefix of the first AddData's multihash
    shown = run_json(mixed, "tail", "cities", "--as-at", before_second_batch)
    assert [r["offset"] for r in shown] == list(range(len(BATCHES[0])))


def test_sql_as_at_a_time_reads_the_0_39_slices_committed_by_then(mixed):
    got = run_json(mixed, "sql", "--as-at", "2026-01-01T12:15:00Z", "-c",
                   'SELECT count(*) AS n FROM "cities"')
    assert got == [{"n": len(BATCHES[0])}]


def test_a_changed_0_39_data_file_is_refused_before_it_is_read(mixed):
    newest = mixed.root.root / "data" / str(mixed.root.data[-1])
    flip_a_byte(newest)
    for args in (("tail", "cities"), ("sql", "-c", 'SELECT count(*) FROM "cities"')):
        proc = coord(*args, cwd=mixed.ws.root, check=False)
        assert proc.returncode == 1
        assert proc.stderr.startswith(
            f"coord: error: dataset cities: refusing to read {newest}: its bytes hash to ")
        assert proc.stderr.endswith(
            "not to its name (the file was changed); run coord verify cities to check the whole dataset\n")


def test_a_0_39_file_found_good_is_remembered_by_its_state(mixed):
    coord_here("tail", "cities", cwd=mixed.ws.root)
    cache = json.loads((mixed.ws.meta / "cache" / "cities" / "checked-slices.json").read_text())
    assert set(cache) == {str(h) for h in mixed.root.blocks[-2:]}  # the AddData blocks
    assert {v[-1] for v in cache.values()} == {str(h) for h in mixed.root.data}


def test_sql_still_reaches_no_file_of_a_0_39_dataset_by_path(mixed):
    path = mixed.root.root / "data" / str(mixed.root.data[0])
    proc = coord_here("sql", "-c", f"SELECT * FROM read_parquet('{path}')", cwd=mixed.ws.root, check=False)
    assert proc.returncode == 1 and "disabled" in proc.stderr.lower()


# --- verify ------------------------------------------------------------------------------------


def test_verify_accepts_a_sound_0_39_dataset_the_reference_wrote_unsigned(mixed):
    # --integrity: the replay (an engine) is tests/transform/test_current_pull.py's
    proc = coord_here("verify", "--integrity", "large-cities", "-r", cwd=mixed.ws.root)
    assert "cities: 5 blocks (ODF 0.39)" in proc.stdout
    assert "5 blocks unsigned (older than any signature: written by a tool that does not sign)" in proc.stdout
    report = run_json(mixed, "verify", "--integrity", "large-cities")[0]
    assert report["ok"] and report["odf"] == "0.39" and report["integrity"] == {"ok": True, "problems": []}
    assert [b["hash"] for b in report["blocks"]] == [str(h) for h in mixed.derivative.blocks]
    assert report["reproducibility"]["verdict"] == "not checked (--integrity)"


def test_verify_names_the_block_whose_data_file_changed_and_fails(mixed):
    flip_a_byte(mixed.root.root / "data" / str(mixed.root.data[0]))
    proc = coord_here("verify", "cities", cwd=mixed.ws.root, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"coord: error: cities: first bad block 3 ({mixed.root.blocks[3]}): "
                                  f"data/{mixed.root.data[0]}: its bytes hash to ")


def test_verify_under_trust_require_trusted_refuses_unsigned_0_39_blocks(mixed):
    coord_here("config", "set", "trust.require", "trusted", cwd=mixed.ws.root)
    proc = coord_here("verify", "cities", "--integrity", cwd=mixed.ws.root, check=False)
    assert proc.returncode == 1
    assert f"first bad block 0 ({mixed.root.blocks[0]}): unsigned and trust.require is trusted" in proc.stderr


def signed_by_the_workspace(ws: Workspace) -> CurrentDataset:
    ds = CurrentDataset(ws, "towns")
    with ds.writer() as w:
        w.seed(new_dataset_key(), e.DatasetKind.ROOT, at(0), alias="towns")
        w.append(e.SetInfo(description="towns"), system_time=at(1))
    return ds


def test_verify_judges_the_workspace_signatures_of_a_0_39_dataset_trusted(mixed):
    signed_by_the_workspace(mixed.ws)
    report = run_json(mixed, "verify", "towns")[0]
    assert report["ok"]
    signers = [(b["authorship"], b["signer"]) for b in report["blocks"]]
    assert signers == [("trusted", mixed.ws.public_key.hex())] * 2


def test_verify_refuses_a_signature_file_that_does_not_sign_its_block(mixed):
    ds = signed_by_the_workspace(mixed.ws)
    seed, head = ds.state().blocks[0].hash, ds.head()
    shutil.copy(ds.root / "signatures" / str(seed), ds.root / "signatures" / str(head))
    proc = coord_here("verify", "towns", cwd=mixed.ws.root, check=False)
    assert proc.returncode == 1
    assert proc.stderr == (f"coord: error: towns: first bad block 1 ({head}): signatures/{head}: "
                           "signature does not match the block\n")


# --- lineage -----------------------------------------------------------------------------------


def test_lineage_resolves_a_0_39_input_by_its_did_to_the_workspace_dataset(mixed):
    graph = run_json(mixed, "lineage", "large-cities")
    assert graph["edges"] == [["cities", "large-cities"]]
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert (nodes["cities"]["kind"], nodes["cities"]["records"]) == ("root", 5)
    assert nodes["large-cities"]["origin"] == "datafusion"
    down = run_json(mixed, "lineage", "cities", "--direction", "down")
    assert down["edges"] == [["cities", "large-cities"]]


def test_a_0_39_derivative_whose_query_changed_after_its_last_step_says_so(mixed):
    with DatasetWriter(mixed.derivative.root, mixed.ws.meta / "locks" / "large-cities.lock") as w:
        w.append(e.SetTransform(inputs=[e.TransformInput(dataset_ref=str(mixed.root.id), alias="cities")],
                                transform=sql("datafusion", "SELECT * FROM cities")),
                 system_time=at(30))
    assert run_json(mixed, "status", "large-cities")[0]["reasons"] == ["queryChanged"]


def test_a_0_39_input_the_workspace_does_not_hold_is_a_missing_node(mixed):
    shutil.rmtree(mixed.root.root)
    graph = run_json(mixed, "lineage", "large-cities")
    did = str(mixed.root.id)
    assert graph["edges"] == [[did, "large-cities"]]
    assert {n["id"]: n["kind"] for n in graph["nodes"]} == {did: "missing", "large-cities": "derivative"}


def test_the_derivative_s_records_are_the_roots_filtered_as_its_query_says(mixed):
    """The fixture's answer the tests above rely on, computed here over the root's files."""
    root = mixed.data(mixed.root)
    large = root.filter(pc.greater(root["population"], 1_000_000))
    assert mixed.data(mixed.derivative)["city"].to_pylist() == large["city"].to_pylist()
