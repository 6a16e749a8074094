"""Snapshot merges into current-ODF (0.39) roots: each pull's snapshot becomes the standard's
operation types (``merge.snapshot`` with ``SnapshotColumns.ops``, ``ingest.current``). Every
answer is computed apart from the ingest path: the expected changes by a dict diff of the
CSV files as pyarrow reads them (the reference's rules: a new key is an append, a changed row
a correct-from with the old values directly followed by a correct-to with the new, a key gone
a retraction of its old values), the state by the last snapshot itself, the folder by
``store.verify.verify_folder`` and ``coord verify --deep``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from coordinator.data.odf_slice import SliceFileError, slice_hashes
from coordinator.store.append import CRASH_POINTS
from coordinator.store.dataset import CurrentDataset
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..support.cli import coord
from .test_pull_odf39 import NAME, manifest

APPEND, RETRACT, CORRECT_FROM, CORRECT_TO = 0, 1, 2, 3


SCHEMA = ', schema: ["id BIGINT", "city STRING", "pop BIGINT"]'  # no event time: the pull's


@pytest.fixture
def home(tmp_path) -> Path:
    coord("init", "--odf", "0.39", ".", cwd=tmp_path)
    path = manifest(tmp_path, NAME, "{kind: snapshot, primaryKey: [id]}", SCHEMA)
    coord("add", str(path), cwd=tmp_path)
    return tmp_path


def dataset(home: Path) -> CurrentDataset:
    return CurrentDataset(Workspace.open(home), NAME)


def snapshot_file(home: Path, name: str, rows: list[tuple]) -> Path:
    path = home / "in" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("id,city,pop\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def by_key(path: Path) -> dict[int, tuple]:
    return {r["id"]: (r["city"], r["pop"]) for r in pacsv.read_csv(path).to_pylist()}


def expected_changes(before: dict[int, tuple], after: dict[int, tuple]) -> list[tuple]:
    """The reference's records turning state ``before`` into snapshot ``after``, as
    (op, id, city, pop), correct-from/correct-to pairs as units, sorted."""
    units = []
    for key, values in after.items():
        if key not in before:
            units.append([(APPEND, key, *values)])
        elif before[key] != values:
            units.append([(CORRECT_FROM, key, *before[key]), (CORRECT_TO, key, *values)])
    units += [[(RETRACT, key, *values)] for key, values in before.items() if key not in after]
    return sorted(units)


def slice_units(table: pa.Table) -> list[list[tuple]]:
    """A slice's records as units: a correct-from with the record right after it, else one."""
    rows = list(zip(*table.select(["op", "id", "city", "pop"]).to_pydict().values(), strict=True))
    units, i = [], 0
    while i < len(rows):
        size = 2 if rows[i][0] == CORRECT_FROM else 1
        units.append(rows[i:i + size])
        i += size
    return units


def slices(ds: CurrentDataset) -> list[pa.Table]:
    return [pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices]


def state_rows(home: Path) -> dict[int, tuple]:
    out = coord("sql", "-o", "json", "-c", f'SELECT id, city, pop FROM "{NAME}@state"', cwd=home)
    return {r["id"]: (r["city"], r["pop"]) for r in json.loads(out.stdout)}


PULLS = [
    [(1, "Oslo", 10), (2, "Lima", 20), (3, "Pune", 30)],
    [(1, "Oslo", 11), (3, "Pune", 30), (4, "Kyiv", 40)],  # update 1, delete 2, insert 4
    [(2, "Lima", 21), (3, "Pune", 31), (4, "Kyiv", 40)],  # re-insert 2, update 3, delete 1
    [(2, "Lima", 21), (3, "Pune", 31), (4, "Kyiv", 40)],  # the same: no changes, no data
]


def test_each_snapshot_becomes_appends_correction_pairs_and_retractions(home):
    ds, before = dataset(home), {}
    for i, rows in enumerate(PULLS):
        after = by_key(snapshot_file(home, f"{i}.csv", rows))
        coord("pull", NAME, cwd=home)
        changes = expected_changes(before, after)
        stored = slices(ds)
        assert len(stored) == sum(1 for rows_ in PULLS[:i + 1] if rows_ is not PULLS[3])
        if changes:
            assert sorted(slice_units(stored[-1])) == changes
        before = after
    table = pa.concat_tables(slices(ds))
    assert table["offset"].to_pylist() == list(range(table.num_rows))
    assert table.schema.names[:4] == ["offset", "op", "system_time", "at"]


def test_a_retraction_and_a_correct_from_carry_the_old_event_time(home):
    snapshot_file(home, "0.csv", PULLS[0])
    coord("pull", NAME, cwd=home)
    snapshot_file(home, "1.csv", PULLS[1])
    coord("pull", NAME, cwd=home)
    first, second = slices(dataset(home))
    old_time = first["at"][0].as_py()
    new_time = second["system_time"][0].as_py()
    times = {(r["op"], r["id"]): r["at"] for r in second.to_pylist()}
    assert times == {(RETRACT, 2): old_time, (CORRECT_FROM, 1): old_time,
                     (CORRECT_TO, 1): new_time, (APPEND, 4): new_time}


def test_the_state_in_sql_and_tail_is_the_latest_snapshot(home):
    for i, rows in enumerate(PULLS[:3]):
        after = by_key(snapshot_file(home, f"{i}.csv", rows))
        coord("pull", NAME, cwd=home)
        assert state_rows(home) == after
    tail = json.loads(coord("tail", "--state", "-o", "json", NAME, cwd=home).stdout)
    assert sorted((r["id"], r["city"], r["pop"]) for r in tail) == sorted(PULLS[2])
    first = dataset(home).state().slices[0].block_hash
    as_at = json.loads(coord("tail", "--state", "-o", "json", "--as-at", first.digest.hex()[:12],
                             NAME, cwd=home).stdout)
    assert sorted((r["id"], r["city"], r["pop"]) for r in as_at) == sorted(PULLS[0])


def test_the_changes_themselves_are_the_datasets_rows_with_their_op(home):
    snapshot_file(home, "0.csv", PULLS[0])
    coord("pull", NAME, cwd=home)
    snapshot_file(home, "1.csv", PULLS[1])
    coord("pull", NAME, cwd=home)
    out = coord("sql", "-o", "json", "-c", f'SELECT "offset", op, id, pop FROM "{NAME}" '
                'WHERE "offset" >= 3 ORDER BY "offset"', cwd=home).stdout
    rows = [(r["op"], r["id"], r["pop"]) for r in json.loads(out)]
    assert sorted(rows) == [(APPEND, 4, 40), (RETRACT, 2, 20), (CORRECT_FROM, 1, 10),
                            (CORRECT_TO, 1, 11)]
    pair = [r[0] for r in rows if r[1] == 1]
    assert pair == [CORRECT_FROM, CORRECT_TO]


def test_verify_deep_passes_on_a_dataset_with_corrections(home):
    for i, rows in enumerate(PULLS):
        snapshot_file(home, f"{i}.csv", rows)
        coord("pull", NAME, cwd=home)
    assert verify_folder(dataset(home).root) == []
    out = coord("verify", "--deep", NAME, cwd=home)
    assert "integrity: ok" in out.stdout


def test_a_slice_whose_correct_from_is_not_followed_by_its_correct_to_is_refused(home, tmp_path):
    for i, rows in enumerate(PULLS[:2]):
        snapshot_file(home, f"{i}.csv", rows)
        coord("pull", NAME, cwd=home)
    table = slices(dataset(home))[1]
    ops = table["op"].to_pylist()
    assert slice_hashes(dataset(home).data_file(dataset(home).state().slices[1].slice))
    broken = tmp_path / "broken.parquet"
    swapped = [CORRECT_TO if o == CORRECT_FROM else CORRECT_FROM if o == CORRECT_TO else o
               for o in ops]
    pq.write_table(table.set_column(1, table.schema.field("op"), pa.array(swapped, pa.int32())),
                   broken)
    with pytest.raises(SliceFileError, match="a correct-from row must be immediately followed"):
        slice_hashes(broken)


def test_a_key_twice_in_a_snapshot_is_refused_naming_the_file_and_rows(home):
    snapshot_file(home, "0.csv", PULLS[0])
    coord("pull", NAME, cwd=home)
    head = dataset(home).head()
    snapshot_file(home, "1.csv", [(1, "Oslo", 11), (5, "Rome", 50), (1, "Oslo", 12)])
    refused = coord("pull", NAME, cwd=home, check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1].endswith(
        "1.csv: rows 1 and 3 have the same primary key {'id': 1}; a snapshot holds each key once")
    assert dataset(home).head() == head


def test_a_snapshot_larger_than_a_quarter_slice_is_merged_out_of_core_to_the_same_records(home):
    coord("config", "set", "ingest.maxSliceBytes", "1MiB", cwd=home)
    n = 100_000
    first = [(i, f"c{i}", i) for i in range(n)]
    # a new key first (so a cut after 2^16 records falls within a pair), every fifth gone,
    # every third changed, new keys at the end
    second = [(-1, "first", 0)] + [(i, f"c{i}", i + (i % 3 > 0)) for i in range(n) if i % 5] + \
        [(i, f"n{i}", i) for i in range(n, n + 1000)]
    before = by_key(snapshot_file(home, "0.csv", first))
    coord("pull", NAME, cwd=home)
    ds = dataset(home)
    earlier = len(ds.state().slices)
    after = by_key(snapshot_file(home, "1.csv", second))
    coord("pull", NAME, cwd=home)
    later = slices(ds)[earlier:]
    assert len(later) > 1  # the change set went into several blocks, no pair split between two
    assert sorted(u for t in later for u in slice_units(t)) == expected_changes(before, after)
    assert state_rows(home) == after
    assert verify_folder(ds.root) == []


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_pull_killed_at_the_commit_leaves_the_old_head_and_the_rerun_adds_the_changes_once(home, point):
    before = by_key(snapshot_file(home, "0.csv", PULLS[0]))
    coord("pull", NAME, cwd=home)
    ds = dataset(home)
    head = ds.head()
    after = by_key(snapshot_file(home, "1.csv", PULLS[1]))
    killed = coord("pull", NAME, cwd=home, env={"COORD_CRASH_AT": point}, check=False)
    assert killed.returncode == -9
    assert (ds.head() == head) == (point != "odf-head-updated")
    coord("pull", NAME, cwd=home)
    stored = slices(ds)
    assert len(stored) == 2 and sorted(slice_units(stored[1])) == expected_changes(before, after)
    assert state_rows(home) == after
    assert verify_folder(ds.root) == []


def test_with_its_own_event_time_a_row_whose_time_alone_changed_is_corrected(tmp_path):
    coord("init", "--odf", "0.39", ".", cwd=tmp_path)
    coord("add", str(manifest(tmp_path, NAME, "{kind: snapshot, primaryKey: [id]}")), cwd=tmp_path)
    oslo, lima = "1,2024-01-01T00:00:00Z,Oslo", "2,2024-01-02T00:00:00Z,Lima"
    for i, lines in enumerate([[oslo, lima], [oslo, "2,2024-02-02T00:00:00Z,Lima"]]):
        path = tmp_path / "in" / f"{i}.csv"
        path.parent.mkdir(exist_ok=True)
        path.write_text("id,at,city\n" + "".join(line + "\n" for line in lines))
        coord("pull", NAME, cwd=tmp_path)  # Oslo is the same in both: no record for it
    second = slices(dataset(tmp_path))[1]
    assert [(r["op"], r["id"], r["at"].isoformat()) for r in second.to_pylist()] == [
        (CORRECT_FROM, 2, "2024-01-02T00:00:00+00:00"), (CORRECT_TO, 2, "2024-02-02T00:00:00+00:00")]
