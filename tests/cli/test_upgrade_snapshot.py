"""``coord upgrade`` of a 0.18 snapshot root: each slice's observed ``I``/``U``/``D`` rows become
0.39 operation types (an append; a correct-from of the key's previous values directly followed
by a correct-to of the new ones; a retraction of the previous values).

The independent answer is a 0.39 snapshot root fed the same snapshot files directly (``coord
init --odf 0.39``): its slices are computed by the 0.39 merge, not from the 0.18 rows. Slice for
slice the records are the same, offsets included, all but the system time (each workspace's
pulls have their own). What differs, by the rules of each version: 0.39 compares a row's own
event time, 0.18 does not, so a row whose event time alone changed is a correction there and
nothing in the upgrade (the last test). Every command runs through the CLI, in the test process
(``coord_here``).
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.store import layout
from coordinator.store.dataset import CurrentDataset
from coordinator.store.read import read_state
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..support.cli import coord_here

APPEND, RETRACT, CORRECT_FROM, CORRECT_TO = 0, 1, 2, 3
NAME = "test.cities"
JAN, FEB = "2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z"
PULLS = [
    [(1, JAN, "Oslo", 10), (2, JAN, "Lima", 20), (3, JAN, "Pune", 30)],
    [(1, JAN, "Oslo", 11), (3, JAN, "Pune", 30), (4, FEB, "Kyiv", 40)],  # U 1, D 2, I 4
    [(2, FEB, "Lima", 21), (3, JAN, "Pune", ""), (4, FEB, "Kyiv", 40)],  # I 2 again, U 3, D 1
    [(2, FEB, "Lima", 21), (3, JAN, "Pune", ""), (4, FEB, "Kyiv", 40)],  # no change, no data
]


def manifest(home: Path) -> Path:
    path = home / "cities.yaml"
    path.write_text(textwrap.dedent(f"""\
        apiVersion: 1
        kind: DatasetSnapshot
        content:
          id: {NAME}
          source:
            kind: root
            fetch: {{kind: filesGlob, path: "in/*.csv"}}
            read: {{kind: csv, header: true,
                    schema: ["id BIGINT", "at TIMESTAMP", "city STRING", "pop BIGINT"]}}
            merge: {{kind: snapshot, primaryKey: [id]}}
          vocab: {{eventTimeColumn: at}}
        """))
    return path


def workspace(home: Path, odf: str, pulls: list[list[tuple]]) -> Path:
    """A workspace of ``odf`` whose snapshot root has pulled ``pulls``, one file each."""
    home.mkdir()
    coord_here("init", "--odf", odf, ".", cwd=home)
    coord_here("add", str(manifest(home)), cwd=home)
    (home / "in").mkdir()
    for i, rows in enumerate(pulls):
        (home / "in" / f"{i}.csv").write_text(
            "id,at,city,pop\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
        coord_here("pull", NAME, cwd=home)
    return home


def slices(folder: Path) -> list[pa.Table]:
    """A 0.39 dataset folder's slices, their system times left out."""
    state = read_state(folder)
    return [pq.read_table(folder / layout.data_file(s.slice.physical_hash)).drop_columns(
        ["system_time"]) for s in state.slices]


def upgraded(tmp_path: Path, pulls: list[list[tuple]]) -> tuple[Path, Path]:
    """(the upgraded 0.18 root, the 0.39 root fed the same files)."""
    old = workspace(tmp_path / "odf18", "0.18", pulls)
    coord_here("upgrade", NAME, "--into", "../out", cwd=old)
    new = workspace(tmp_path / "odf39", "0.39", pulls)
    return tmp_path / "out" / NAME, CurrentDataset(Workspace.open(new), NAME).root


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple[Path, Path]:
    return upgraded(tmp_path_factory.mktemp("snapshot"), PULLS)


def test_the_upgrade_verifies_and_has_a_slice_per_snapshot_that_changed_something(both):
    up, direct = both
    assert verify_folder(up) == []
    assert len(read_state(up).slices) == len(read_state(direct).slices) == 3


def test_each_slice_holds_the_records_the_039_merge_writes_for_the_same_snapshot(both):
    up, direct = both
    for mine, theirs in zip(slices(up), slices(direct), strict=True):
        assert mine.schema == theirs.schema
        assert mine.to_pylist() == theirs.to_pylist()


def test_the_schema_is_the_039_roots_with_op_and_without_the_observed_column(both):
    up, direct = both
    schema = read_state(up).schema
    assert schema == read_state(direct).schema
    assert [f.name for f in schema.schema.fields] == ["offset", "op", "system_time", "at", "id",
                                                "city", "pop"]


def test_u_is_a_correct_from_with_the_old_values_then_a_correct_to_and_d_retracts_the_old_ones(both):
    up, _ = both
    second = [(r["op"], r["id"], r["pop"]) for r in slices(up)[1].to_pylist()]
    assert sorted(second) == [(APPEND, 4, 40), (RETRACT, 2, 20), (CORRECT_FROM, 1, 10),
                              (CORRECT_TO, 1, 11)]
    pair = second.index((CORRECT_FROM, 1, 10))
    assert second[pair + 1] == (CORRECT_TO, 1, 11)


def test_a_retraction_keeps_the_retracted_records_event_time_not_the_snapshots(tmp_path):
    old = workspace(tmp_path / "odf18", "0.18", PULLS[:2])
    [removed] = json.loads(coord_here("sql", "-o", "json", "-c", "SELECT id, \"at\" FROM "
                                      f"\"{NAME}\" WHERE observed = 'D'", cwd=old).stdout)
    assert removed == {"id": 2, "at": FEB}  # the snapshot's time: the latest of its rows'
    coord_here("upgrade", NAME, "--into", "../out", cwd=old)
    retracted = [r for t in slices(tmp_path / "out" / NAME) for r in t.to_pylist()
                 if r["op"] == RETRACT]
    assert [(r["id"], r["at"].isoformat()) for r in retracted] == [(2, "2024-01-01T00:00:00+00:00")]


def test_a_null_value_that_appears_is_a_correction_to_null(both):
    up, _ = both
    third = [(r["op"], r["id"], r["pop"]) for r in slices(up)[2].to_pylist()]
    assert (CORRECT_FROM, 3, 30) in third and (CORRECT_TO, 3, None) in third


def test_a_change_set_committed_as_several_018_blocks_gives_the_039_records(tmp_path):
    """A snapshot larger than a quarter slice is diffed out of core and its changes committed
    as several blocks: each block's rows are rewritten against the state the ones before it
    left. The two versions cut the change set differently, so the union is compared."""
    n = 70_000  # every key changes: over 65,536 changes, the batches DuckDB hands them out in
    first = [(i, JAN, f"c{i}", i) for i in range(n)]
    second = [(i, JAN, f"c{i}", i + 1) for i in range(n) if i % 5] + \
        [(i, FEB, f"n{i}", i) for i in range(n, n + 500)]
    homes = {}
    for odf in ("0.18", "0.39"):
        home = workspace(tmp_path / odf, odf, [])
        coord_here("config", "set", "ingest.maxSliceBytes", "1MiB", cwd=home)
        for i, rows in enumerate([first, second]):
            (home / "in" / f"{i}.csv").write_text(
                "id,at,city,pop\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
            coord_here("pull", NAME, cwd=home)
        homes[odf] = home
    coord_here("upgrade", NAME, "--into", "../out", cwd=homes["0.18"])
    up = slices(tmp_path / "out" / NAME)
    direct = slices(CurrentDataset(Workspace.open(homes["0.39"]), NAME).root)
    assert len(up) > 2  # the second snapshot's changes span several blocks

    def records(tables: list[pa.Table]) -> pa.Table:
        table = pa.concat_tables(tables).drop_columns(["offset"])
        return table.sort_by([(name, "ascending") for name in table.column_names])

    assert records(up).equals(records(direct))
    assert verify_folder(tmp_path / "out" / NAME) == []


def test_a_row_whose_own_event_time_alone_changed_is_a_correction_only_in_039(tmp_path):
    moved = [[(1, JAN, "Oslo", 10)], [(1, FEB, "Oslo", 10)]]
    up, direct = upgraded(tmp_path, moved)
    assert [len(t) for t in slices(direct)] == [1, 2]  # 0.39 compares the event time
    assert [t["op"].to_pylist() for t in slices(direct)][1] == [CORRECT_FROM, CORRECT_TO]
    assert [len(t) for t in slices(up)] == [1]  # 0.18 wrote no U, so there is nothing to upgrade


def test_a_primary_key_that_changes_along_the_chain_is_refused_in_one_line(tmp_path):
    old = workspace(tmp_path / "odf18", "0.18", PULLS[:1])
    path = manifest(old)
    path.write_text(path.read_text().replace("primaryKey: [id]", "primaryKey: [city]"))
    coord_here("add", "--replace", str(path), cwd=old)
    refused = coord_here("upgrade", NAME, "--into", "../out", cwd=old, check=False)
    assert refused.returncode == 1
    assert refused.stderr == (f"coord: error: {NAME}: its snapshot merge's primary key changes "
                              "along the chain; coord upgrade rewrites observed rows against one "
                              "key\n")
    assert not (tmp_path / "out" / NAME).exists()
