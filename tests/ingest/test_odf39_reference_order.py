"""A root merged by primary key stores each slice in the reference's order (kamu-cli v0.265,
``ingest-datafusion/src/merge_strategies``: ``sort_order`` is the primary key, then the
operation type, and the writer numbers the records in that order), so the same input gives
the same offsets and logical hash as the reference's.

The expected slices are computed apart from the ingest path, by DuckDB running the
reference's own queries as its code documents them: the snapshot merge's change data capture
(``cdc_diff``: a full outer join of the state and the new snapshot, ``UNION ALL`` the
correct-from records) over the state it projects (``changelog::project``: each key's latest
record by offset, retracted keys left out), numbered by ``row_number() OVER (ORDER BY key,
op)``; the logical hash of that table by the arrow-digest oracle of tests/data.
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.data.arrow_digest import multihash
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..data.test_arrow_digest import oracle_digest
from ..metadata.test_manifest_current import root
from ..support.cli import coord

NAME = "test.cities"
# the key is not the first column, so that ordering by the data would differ from the key
SNAPSHOT_COLUMNS = "['city STRING', 'id BIGINT', 'pop BIGINT']"
SNAPSHOTS = [
    [("Pune", 3, 30), ("Oslo", 1, 10), ("Lima", 2, 20)],
    [("Kyiv", 4, 40), ("Oslo", 1, 11), ("Pune", 3, 30)],  # update 1, delete 2, insert 4
    [("Pune", 3, 31), ("Lima", 2, 21), ("Kyiv", 4, 40)],  # re-insert 2, update 3, delete 1
]

# kamu-cli's MergeStrategySnapshot::cdc_diff and changelog::project, as DuckDB SQL
REFERENCE_SNAPSHOT_MERGE = """
WITH ledger AS (SELECT * FROM read_parquet(?)),
old AS (
    SELECT "at", city, id, pop FROM (
        SELECT *, row_number() OVER (PARTITION BY id ORDER BY "offset" DESC) AS __rank
        FROM ledger)
    WHERE __rank = 1 AND op != 1),
new AS (SELECT NULL::TIMESTAMPTZ AS "at", city, id, pop FROM read_csv(?, header = true)),
cdc AS (
    SELECT old."at" AS o_at, old.city AS o_city, old.id AS o_id, old.pop AS o_pop,
           new."at" AS n_at, new.city AS n_city, new.id AS n_id, new.pop AS n_pop
    FROM old FULL OUTER JOIN new ON old.id = new.id
    WHERE (new."at" IS NOT NULL AND old."at" IS DISTINCT FROM new."at")
       OR old.city IS DISTINCT FROM new.city OR old.pop IS DISTINCT FROM new.pop),
merged AS (
    SELECT CASE WHEN o_id IS NULL THEN 0 WHEN n_id IS NULL THEN 1 ELSE 3 END AS op,
           CASE WHEN n_id IS NULL THEN o_at ELSE n_at END AS "at",
           CASE WHEN n_id IS NULL THEN o_city ELSE n_city END AS city,
           CASE WHEN n_id IS NULL THEN o_id ELSE n_id END AS id,
           CASE WHEN n_id IS NULL THEN o_pop ELSE n_pop END AS pop
    FROM cdc
    UNION ALL
    SELECT 2, o_at, o_city, o_id, o_pop FROM cdc WHERE o_id IS NOT NULL AND n_id IS NOT NULL)
SELECT row_number() OVER (ORDER BY id, op) - 1 + ? AS "offset", op,
       ?::TIMESTAMPTZ AS system_time, coalesce("at", ?::TIMESTAMPTZ) AS "at", city, id, pop
FROM merged ORDER BY "offset"
"""


@pytest.fixture
def home(tmp_path) -> Path:
    coord("init", "--odf", "0.39", ".", cwd=tmp_path)
    coord("add", str(root(tmp_path, NAME, fetch="{kind: FilesGlob, path: 'in/*.csv'}",
                          read=f"{{kind: Csv, header: true, ddlSchema: {SNAPSHOT_COLUMNS}}}",
                          merge="{kind: Snapshot, primaryKey: [id]}",
                          more="    - {kind: SetVocab, eventTimeColumn: at}\n")), cwd=tmp_path)
    return tmp_path


def snapshot_file(home: Path, name: str, rows: list[tuple]) -> Path:
    path = home / "in" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("city,id,pop\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def the_references_slice(ledger: list[Path], snapshot: Path, first_offset: int,
                         system_time: object, schema: pa.Schema) -> pa.Table:
    """The slice the reference writes for ``snapshot`` over the slices ``ledger``, by its
    merge's queries in DuckDB (an empty ledger: the first slice's schema, no rows)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    files = [str(p) for p in ledger]
    if not files:  # the reference's empty previous state
        empty = snapshot.parent.parent / "empty.parquet"
        pq.write_table(schema.empty_table(), empty)
        files = [str(empty)]
    table = con.sql(REFERENCE_SNAPSHOT_MERGE, params=[files, str(snapshot), first_offset,
                                                      system_time, system_time]).to_arrow_table()
    return table.cast(schema)


def test_each_snapshot_slice_has_the_references_records_offsets_and_logical_hash(home):
    ds = CurrentDataset(Workspace.open(home), NAME)
    for i, rows in enumerate(SNAPSHOTS):
        given = snapshot_file(home, f"{i}.csv", rows)
        coord("pull", NAME, cwd=home)
        *ledger, last = ds.state().slices
        stored = pq.read_table(ds.data_file(last.slice))
        expected = the_references_slice([ds.data_file(r.slice) for r in ledger], given,
                                        last.slice.offset_interval.start,
                                        stored["system_time"][0].as_py(), stored.schema)
        assert stored.to_pylist() == expected.to_pylist(), f"snapshot {i}"
        assert last.slice.logical_hash.to_bytes() == multihash(
            oracle_digest(expected.schema, expected.to_batches())), f"snapshot {i}"


def test_the_order_is_not_that_of_event_time_then_operation_type(home):
    """The second snapshot's records in the reference's order differ from the order by event
    time then operation type (what coord stored before): the test above can tell them apart."""
    for i, rows in enumerate(SNAPSHOTS[:2]):
        snapshot_file(home, f"{i}.csv", rows)
        coord("pull", NAME, cwd=home)
    ds = CurrentDataset(Workspace.open(home), NAME)
    stored = pq.read_table(ds.data_file(ds.state().slices[-1].slice))
    records = [(r["op"], r["id"]) for r in stored.to_pylist()]
    assert records == [(2, 1), (3, 1), (1, 2), (0, 4)]
    by_time = sorted(stored.to_pylist(), key=lambda r: (r["at"], r["op"]))
    assert [(r["op"], r["id"]) for r in by_time] != records


CHANGELOG_FILES = [
    [(0, 3, "Pune", 30), (0, 1, "Oslo", 10), (0, 2, "Lima", 20)],
    [(0, 4, "Kyiv", 40), (2, 2, "Lima", 20), (3, 2, "Lima", 21), (1, 1, "Oslo", 10)],
]


def test_a_changelog_slice_is_in_the_references_order_by_key_then_operation_type(tmp_path):
    coord("init", "--odf", "0.39", ".", cwd=tmp_path)
    coord("add", str(root(tmp_path, NAME, fetch="{kind: FilesGlob, path: 'in/*.csv'}",
                          read="{kind: Csv, header: true, ddlSchema: ['op INT', 'id BIGINT', "
                               "'city STRING', 'pop BIGINT']}",
                          merge="{kind: ChangelogStream, primaryKey: [id]}")), cwd=tmp_path)
    ds = CurrentDataset(Workspace.open(tmp_path), NAME)
    for i, rows in enumerate(CHANGELOG_FILES):
        given = tmp_path / "in" / f"{i}.csv"
        given.parent.mkdir(exist_ok=True)
        given.write_text("op,id,city,pop\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
        coord("pull", NAME, cwd=tmp_path)
        stored = pq.read_table(ds.data_file(ds.state().slices[-1].slice))
        expected = duckdb.sql(f"SELECT op, id, city, pop FROM read_csv('{given}', header = true) "
                              "ORDER BY id, op").fetchall()
        assert [tuple(r.values()) for r in stored.select(["op", "id", "city", "pop"]).to_pylist()] \
            == expected, f"file {i}"
