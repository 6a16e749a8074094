"""A current-ODF (0.39) derivative pulled through the real ``coord pull`` with the DuckDB test
engine (tests/support/fake_engine.py): its inputs' new slices go to the engine, the output is
committed as SetDataSchema + ExecuteTransform through the append path, and every answer is
computed again from the input records with pyarrow.

The workspace (and the same one after its first pull) is built once for the module and copied
for each test; the commands run in the test process (``coord_here``) but for the first pull
and the killed ones, which run as ``coord`` processes."""
from __future__ import annotations

import io
import shutil
import tarfile
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord, coord_here
from ..support.odf39_datasets import (
    BATCHES,
    Written,
    append_rows,
    define_derivative,
    sql,
    write_derivative,
    write_root,
)

QUERY = "SELECT event_time, city, population FROM cities WHERE population > 1000000"
MORE = [(datetime(2025, 3, 1, tzinfo=UTC), "Delhi", 32_941_000),
        (datetime(2025, 3, 2, tzinfo=UTC), "Porto", 231_800)]


@pytest.fixture(scope="module")
def defined(tmp_path_factory) -> Workspace:
    """The root ``cities`` (two AddData) and the derivative ``large`` over it, not pulled."""
    home = tmp_path_factory.mktemp("defined")
    ws = Workspace.init(home, OdfVersion.V039)
    write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", home / "scratch")
    define_derivative(ws, "large", {"cities": CurrentDataset(ws, "cities").state().id}, QUERY)
    return ws


@pytest.fixture(scope="module")
def pulled(defined, tmp_path_factory) -> Workspace:
    """``defined`` after ``large``'s first pull (its SetDataSchema and first step)."""
    ws = copy_of(defined, tmp_path_factory.mktemp("pulled"))
    pull(ws, "large")
    return ws


def copy_of(ws: Workspace, folder) -> Workspace:
    shutil.copytree(ws.root, folder, dirs_exist_ok=True)
    return Workspace.open(folder)


@pytest.fixture
def fresh(defined, tmp_path) -> Workspace:
    """A copy of ``defined`` for one test."""
    return copy_of(defined, tmp_path)


@pytest.fixture
def ws(pulled, tmp_path) -> Workspace:
    """A copy of ``pulled`` for one test."""
    return copy_of(pulled, tmp_path)


def written_root(ws: Workspace) -> Written:
    """What ``write_root`` wrote of the fixture's root, as ``write_derivative`` needs it."""
    state = CurrentDataset(ws, "cities").state()
    return Written(CurrentDataset(ws, "cities").root, state.id, tuple(b.hash for b in state.blocks),
                   tuple(r.slice.physical_hash for r in state.slices), ())


def pull(ws: Workspace, *args: str, check: bool = True):
    return coord_here("pull", *args, cwd=ws.root, check=check, fake_engine=True)


def records(ws: Workspace, name: str) -> pa.Table:
    """Every record of a 0.39 dataset, in offset order."""
    ds = CurrentDataset(ws, name)
    return pa.concat_tables([pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices])


def large_of(table: pa.Table) -> pa.Table:
    """The query, computed with pyarrow over the input's records."""
    return table.filter(pc.greater(table["population"], 1_000_000)).select(
        ["event_time", "city", "population"])


def events(ws: Workspace, name: str, kind) -> list:
    return [b.block.event for b in CurrentDataset(ws, name).state().blocks
            if isinstance(b.block.event, kind)]


def test_a_pull_runs_the_query_over_every_input_record_and_commits_a_slice(fresh):
    out = coord("pull", "large", cwd=fresh.root, fake_engine=True).stdout  # a coord process
    expected = large_of(records(fresh, "cities"))
    assert f"large: {expected.num_rows} new records" in out
    got = records(fresh, "large")
    assert got.select(["event_time", "city", "population"]).sort_by("event_time").equals(
        expected.sort_by("event_time"))
    assert got["offset"].to_pylist() == list(range(expected.num_rows))
    assert set(got["op"].to_pylist()) == {0}
    assert verify_folder(CurrentDataset(fresh, "large").root) == []


def test_the_first_step_records_the_schema_then_what_it_read_of_each_input(ws):
    kinds = [type(b.block.event).__name__ for b in CurrentDataset(ws, "large").state().blocks]
    assert kinds == ["Seed", "SetTransform", "SetDataSchema", "ExecuteTransform"]
    [step] = events(ws, "large", e.ExecuteTransform)
    root = CurrentDataset(ws, "cities").state()
    [used] = step.query_inputs
    assert (used.dataset_id, used.prev_block_hash, used.new_block_hash) == (root.id, None, root.head)
    assert (used.prev_offset, used.new_offset) == (None, root.last_offset)
    assert step.prev_checkpoint is None and step.new_checkpoint is not None
    # the input's watermark is the one its chain records (ODF's rule), not its event times
    assert step.new_watermark == root.watermark == max(r[0] for r in BATCHES[-1])


def test_the_next_pull_reads_only_the_new_slices_and_continues_offsets_and_checkpoint(ws):
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", MORE)
    assert "large: 1 new records" in pull(ws, "large").stdout
    first, second = events(ws, "large", e.ExecuteTransform)
    [used] = second.query_inputs
    assert (used.prev_offset, used.new_offset) == (4, 6)  # MORE: offsets 5 and 6
    assert used.prev_block_hash == first.query_inputs[0].new_block_hash
    assert second.prev_checkpoint == first.new_checkpoint.physical_hash
    assert second.prev_offset == first.new_data.offset_interval.end
    assert len(events(ws, "large", e.SetDataSchema)) == 1  # the same schema: not again
    got = records(ws, "large")
    assert got["city"].to_pylist() == large_of(records(ws, "cities"))["city"].to_pylist()
    assert got["offset"].to_pylist() == list(range(got.num_rows))
    assert verify_folder(CurrentDataset(ws, "large").root) == []


def test_a_pull_with_nothing_new_commits_nothing(ws):
    head = CurrentDataset(ws, "large").head()
    assert "large: up to date" in pull(ws, "large").stdout
    assert CurrentDataset(ws, "large").head() == head


def test_a_watermark_the_input_moved_without_data_moves_the_output_watermark(ws):
    later = datetime(2025, 6, 1, tzinfo=UTC)
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", [],
                watermark=later)
    assert "large: 0 new records" in pull(ws, "large").stdout
    step = events(ws, "large", e.ExecuteTransform)[-1]
    assert step.new_data is None and step.new_watermark == later
    assert step.query_inputs[0].new_offset is None  # no new records read


def test_an_input_with_retractions_is_recomputed_from_then_on(ws):
    # a retraction the root's chain did not announce (an append merge): the query, which does
    # not carry op, is computed over the root's rows from this step on
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch",
                [BATCHES[1][0]], op=1)  # Seoul taken away
    pull(ws, "large")
    step = events(ws, "large", e.ExecuteTransform)[-1]
    assert step.new_checkpoint is None  # a recomputed step keeps none
    got = records(ws, "large")
    held = {r["city"] for r in got.to_pylist() if r["op"] == 0} - \
        {r["city"] for r in got.to_pylist() if r["op"] == 1}
    assert held == {"Toronto"}
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", MORE)
    pull(ws, "large")  # appends only again: still recomputed (its last step kept no checkpoint)
    assert events(ws, "large", e.ExecuteTransform)[-1].new_checkpoint is None
    assert "Delhi" in records(ws, "large")["city"].to_pylist()


def test_a_damaged_checkpoint_is_refused_before_it_is_read(ws):
    [step] = events(ws, "large", e.ExecuteTransform)
    path = CurrentDataset(ws, "large").checkpoint_file(step.new_checkpoint)
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    path.write_bytes(bytes(data))
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", MORE)
    proc = pull(ws, "large", check=False)
    assert proc.returncode == 1
    assert f"{path}: its bytes hash to" in proc.stdout + proc.stderr


def test_a_pulled_derivatives_checkpoint_with_a_link_out_is_refused_and_writes_nothing_outside(
        fresh, tmp_path):
    # whoever authors a block chooses its checkpoint file: the hash check alone proves nothing
    outside = tmp_path / "outside"
    outside.mkdir()
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w") as tar:
        link = tarfile.TarInfo("escape")
        link.type, link.linkname = tarfile.SYMTYPE, str(outside)
        tar.addfile(link)
        planted = tarfile.TarInfo("escape/planted")
        planted.size = 5
        tar.addfile(planted, io.BytesIO(b"owned"))
    write_derivative(fresh.meta / "datasets" / "large-cities", fresh.meta / "locks", tmp_path / "d",
                     written_root(fresh), checkpoint=packed.getvalue())
    append_rows(fresh.meta / "datasets" / "cities", fresh.meta / "locks", fresh.root / "scratch", MORE)
    head = CurrentDataset(fresh, "large-cities").head()
    proc = pull(fresh, "large-cities", check=False)
    assert proc.returncode == 1
    assert "'escape' is not a plain file or folder" in proc.stderr
    assert list(outside.iterdir()) == []
    assert CurrentDataset(fresh, "large-cities").head() == head


def verify(ws: Workspace, name: str, check: bool = True):
    return coord_here("verify", name, cwd=ws.root, check=check, fake_engine=True)


def test_verify_replays_the_pulled_steps_and_they_reproduce(ws):
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", MORE)
    pull(ws, "large")
    out = coord("verify", "large", cwd=ws.root, fake_engine=True).stdout  # a coord process
    assert "integrity: ok" in out and "reproducibility: reproduced" in out


def test_a_derivative_written_elsewhere_reproduces(fresh, tmp_path):
    # the fixture's chain: its own key, its own checkpoints, the query's records
    root = written_root(fresh)
    write_derivative(fresh.meta / "datasets" / "large-cities", fresh.meta / "locks", tmp_path / "d", root)
    assert "reproducibility: reproduced" in verify(fresh, "large-cities").stdout


def test_a_step_whose_records_are_not_its_querys_does_not_reproduce(fresh, tmp_path):
    root = written_root(fresh)
    write_derivative(fresh.meta / "datasets" / "large-cities", fresh.meta / "locks", tmp_path / "d", root,
                     query=QUERY.replace("1000000", "5000000"))
    proc = verify(fresh, "large-cities", check=False)
    assert proc.returncode == 1
    assert "integrity: ok" in proc.stdout
    assert "did not reproduce: recorded 1 records, replay gave 0" in proc.stdout
    assert "reproducibility: 1 block(s) did not reproduce" in proc.stdout


def test_verify_integrity_only_does_not_replay(ws):
    out = coord_here("verify", "--integrity", "large", cwd=ws.root).stdout  # no engine at all
    assert "integrity: ok" in out and "reproducibility: not checked" in out


def change_query(ws: Workspace, name: str, query: str) -> None:
    """A new SetTransform on the derivative: the same inputs and engine, ``query`` (normalized)."""
    ds = CurrentDataset(ws, name)
    with ds.writer() as w:
        old = w.state.transform
        w.append(e.SetTransform(inputs=old.inputs, transform=sql(old.transform.engine, query)),
                 system_time=w.state.blocks[-1].block.system_time)


def test_a_query_that_adds_a_column_records_the_grown_schema_before_its_data(ws):
    change_query(ws, "large", QUERY.replace("population FROM", "population, population * 2 AS doubled FROM"))
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", MORE)
    pull(ws, "large")
    kinds = [type(b.block.event).__name__ for b in CurrentDataset(ws, "large").state().blocks]
    assert kinds[-3:] == ["SetTransform", "SetDataSchema", "ExecuteTransform"]
    names = [f.name for f in events(ws, "large", e.SetDataSchema)[-1].schema.fields]
    assert names[-2:] == ["population", "doubled"]
    newest = CurrentDataset(ws, "large").state().slices[-1]
    table = pq.read_table(CurrentDataset(ws, "large").data_file(newest.slice))
    assert table["doubled"].to_pylist() == [2 * p for p in table["population"].to_pylist()]
    # each step replays under the query and schema of its time (a migration between them)
    assert "reproducibility: reproduced" in verify(ws, "large").stdout


def test_a_query_that_drops_a_column_is_refused_and_nothing_is_committed(ws):
    change_query(ws, "large", QUERY.replace(", population FROM", " FROM"))
    head = CurrentDataset(ws, "large").head()
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", MORE)
    proc = pull(ws, "large", check=False)
    assert proc.returncode == 1
    assert "the query's output drops column 'population'" in proc.stdout + proc.stderr
    assert CurrentDataset(ws, "large").head() == head


def test_an_input_data_file_that_is_not_its_blocks_is_refused_before_the_engine_reads_it(fresh):
    cities = CurrentDataset(fresh, "cities")
    path = cities.data_file(cities.state().slices[0].slice)
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    proc = pull(fresh, "large", check=False)
    assert proc.returncode == 1
    assert f"dataset cities: refusing to read {path}: its bytes hash to" in proc.stdout + proc.stderr
    assert len(CurrentDataset(fresh, "large").state().blocks) == 2  # Seed, SetTransform


def test_a_derivative_of_a_derivative_reads_it_by_id_under_another_alias(ws):
    # the query names its input "big": the input is found by its did:odf, not by that name
    define_derivative(ws, "huge", {"big": CurrentDataset(ws, "large").state().id},
                      "SELECT event_time, city FROM big WHERE population > 5000000")
    assert "huge: 1 new records" in pull(ws, "huge").stdout
    assert records(ws, "huge")["city"].to_pylist() == ["Seoul"]
    [step] = events(ws, "huge", e.ExecuteTransform)
    large = CurrentDataset(ws, "large").state()
    assert step.query_inputs[0].new_block_hash == large.head
    assert step.new_watermark == large.watermark  # an ExecuteTransform's watermark is read too
    assert "reproducibility: reproduced" in verify(ws, "huge").stdout


@pytest.mark.parametrize("point", ["engine-answered", "odf-data-installed", "odf-block-written",
                                   "odf-signature-written"])
def test_a_pull_killed_part_way_leaves_the_dataset_as_it_was_and_the_next_one_finishes(ws, point):
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", MORE)
    head = CurrentDataset(ws, "large").head()
    killed = coord("pull", "large", cwd=ws.root, env={"COORD_CRASH_AT": point}, check=False,
                   fake_engine=True)
    assert killed.returncode != 0
    assert CurrentDataset(ws, "large").head() == head
    pull(ws, "large")
    assert len(events(ws, "large", e.ExecuteTransform)) == 2
    got = records(ws, "large")
    assert got["city"].to_pylist() == large_of(records(ws, "cities"))["city"].to_pylist()
    assert verify_folder(CurrentDataset(ws, "large").root) == []


def test_a_changed_query_with_nothing_new_to_read_commits_nothing(ws):
    change_query(ws, "large", QUERY.replace("1000000", "2000000"))
    head = CurrentDataset(ws, "large").head()
    assert "large: up to date" in pull(ws, "large").stdout
    assert CurrentDataset(ws, "large").head() == head
