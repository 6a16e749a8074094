"""Stream merges into current-ODF (0.39) roots, as the reference (kamu-cli v0.265,
``ingest-datafusion/src/merge_strategies``) writes them: ``UpsertStream`` turns each key's last
record of a file into an append, a correct-from/correct-to pair or a retraction against the
state (nothing for an unchanged row); ``ChangelogStream`` stores the records as given. Both are
checked against the state they change: a deletion of a key not held, or a changelog's retraction
or correct-from that does not repeat the record held, is refused naming the row. Every
expected answer is computed by hand from the CSV rows (``upserted``, ``projected``), apart
from the ingest path; the state is read back through ``coord sql "DS@state"`` and ``coord tail
--state``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..metadata.test_manifest_current import root as current_root
from ..support.cli import coord
from ..support.push import push_source, root_manifest

APPEND, RETRACT, CORRECT_FROM, CORRECT_TO = 0, 1, 2, 3
UPSERTS, CHANGES = "test.upserts", "test.changes"
COLUMNS = "['op INT', 'id BIGINT', 'city STRING', 'pop BIGINT']"


def root(home: Path, name: str, merge: str, columns: str = COLUMNS, vocab: str = "") -> Path:
    """A root in the reference's current form, reading ``in/<name>/*.csv``."""
    return current_root(home, name, fetch=f"{{kind: FilesGlob, path: 'in/{name}/*.csv'}}",
                        read=f"{{kind: Csv, header: true, ddlSchema: {columns}}}", merge=merge,
                        more=vocab, file=f"{name}.yaml")


@pytest.fixture
def home(tmp_path) -> Path:
    coord("init", "--odf", "0.39", ".", cwd=tmp_path)
    coord("add", str(root(tmp_path, UPSERTS, "{kind: UpsertStream, primaryKey: [id]}")),
          str(root(tmp_path, CHANGES, "{kind: ChangelogStream, primaryKey: [id]}")), cwd=tmp_path)
    return tmp_path


def csv(home: Path, name: str, file: str, rows: list[tuple], header: str = "op,id,city,pop") -> Path:
    path = home / "in" / name / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def dataset(home: Path, name: str) -> CurrentDataset:
    return CurrentDataset(Workspace.open(home), name)


def slices(home: Path, name: str) -> list[pa.Table]:
    ds = dataset(home, name)
    return [pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices]


def units(table: pa.Table | list[tuple]) -> list[list[tuple]]:
    """A slice's (op, id, city, pop) records (or such tuples) as units, a correct-from with
    the record after it (which must be its correct-to), sorted."""
    rows = table if isinstance(table, list) else \
        [(r["op"], r["id"], r["city"], r["pop"]) for r in table.to_pylist()]
    out, i = [], 0
    while i < len(rows):
        size = 2 if rows[i][0] == CORRECT_FROM else 1
        assert size == 1 or rows[i + 1][:2] == (CORRECT_TO, rows[i][1])
        out.append(rows[i:i + size])
        i += size
    return sorted(out)


def upserted(state: dict[int, tuple], rows: list[tuple]) -> list[list[tuple]]:
    """By hand, the reference's rules: each key's last row of the file; a retract deletes the
    key (its old values retracted) if the state has it, anything else upserts it (a new key
    appended, changed values a correct-from/correct-to pair, the same values nothing).
    ``state`` is updated; the changes are returned as sorted units."""
    last = {key: (op, (city, pop)) for op, key, city, pop in rows}
    changes = []
    for key, (op, values) in last.items():
        if op == RETRACT:
            if key in state:
                changes.append([(RETRACT, key, *state.pop(key))])
            continue
        if key not in state:
            changes.append([(APPEND, key, *values)])
        elif state[key] != values:
            changes.append([(CORRECT_FROM, key, *state[key]), (CORRECT_TO, key, *values)])
        state[key] = values
    return sorted(changes)


def projected(rows: list[tuple]) -> dict[int, tuple]:
    """By hand, the state a change log describes: each key's last record, unless a retraction."""
    state: dict[int, tuple] = {}
    for op, key, city, pop in rows:
        if op == RETRACT:
            state.pop(key, None)
        else:
            state[key] = (city, pop)
    return state


def state_in_sql(home: Path, name: str) -> dict[int, tuple]:
    out = coord("sql", "-o", "json", "-c", f'SELECT id, city, pop FROM "{name}@state"', cwd=home)
    return {r["id"]: (r["city"], r["pop"]) for r in json.loads(out.stdout)}


def state_in_tail(home: Path, name: str) -> dict[int, tuple]:
    out = coord("tail", "--state", "-o", "json", name, cwd=home)
    return {r["id"]: (r["city"], r["pop"]) for r in json.loads(out.stdout)}


# the reference's own cases (test_merge_strategy_upsert_stream.rs), one file per pull
UPSERT_PULLS = [
    # a key upserted three times (the last as a correct-to) is one append of its last values;
    # a key appended then retracted in the same file is nothing
    [(APPEND, 1, "Oslo", 1), (APPEND, 1, "Oslo", 2), (CORRECT_TO, 1, "Oslo", 3),
     (APPEND, 2, "Lima", 2), (APPEND, 3, "Kyiv", 3), (RETRACT, 2, "Lima", 2)],
    # the same values again: nothing; then new values for 1 (twice, the last wins) and a new key
    [(APPEND, 3, "Kyiv", 3), (APPEND, 1, "Oslo", 4), (APPEND, 1, "Oslo", 5), (APPEND, 4, "Pune", 4)],
    # a deletion with other values retracts the values held; an upsert then deletion of 3 too
    [(RETRACT, 4, "Pune", 0), (CORRECT_TO, 3, "Kyiv", 6), (RETRACT, 3, "Kyiv", 0)],
    # a deleted key upserted again is appended; a correct-to alone is an upsert
    [(APPEND, 4, "Pune", 7), (CORRECT_TO, 1, "Oslo", 8)],
    # nothing changes: no block
    [(APPEND, 4, "Pune", 7)],
]


def test_upserts_become_appends_correction_pairs_and_retractions_pull_by_pull(home):
    state: dict[int, tuple] = {}
    for i, rows in enumerate(UPSERT_PULLS):
        csv(home, UPSERTS, f"{i}.csv", rows)
        coord("pull", UPSERTS, cwd=home)
        expected = upserted(state, rows)
        stored = slices(home, UPSERTS)
        if expected:
            assert units(stored[-1]) == expected, f"pull {i}"
        assert len(stored) == min(i + 1, 4)  # the last pull changes nothing: no block
        assert state_in_sql(home, UPSERTS) == state, f"pull {i}"
    assert state == {1: ("Oslo", 8), 4: ("Pune", 7)}  # the hand computation, checked by eye
    assert state_in_tail(home, UPSERTS) == state
    table = pa.concat_tables(slices(home, UPSERTS))
    assert table["offset"].to_pylist() == list(range(table.num_rows))
    assert "integrity: ok" in coord("verify", "--deep", UPSERTS, cwd=home).stdout


def test_a_retraction_and_a_correct_from_carry_the_old_event_time(home):
    csv(home, UPSERTS, "0.csv", [(APPEND, 1, "Oslo", 1), (APPEND, 2, "Lima", 2)])
    coord("pull", UPSERTS, cwd=home)
    csv(home, UPSERTS, "1.csv", [(APPEND, 1, "Oslo", 5), (RETRACT, 2, "Lima", 0)])
    coord("pull", UPSERTS, cwd=home)
    first, second = slices(home, UPSERTS)
    old, new = first["event_time"][0].as_py(), second["system_time"][0].as_py()
    times = {r["op"]: r["event_time"] for r in second.to_pylist()}
    assert times == {RETRACT: old, CORRECT_FROM: old, CORRECT_TO: new}
    assert {r["op"]: r["pop"] for r in second.to_pylist()} == {RETRACT: 2, CORRECT_FROM: 1,
                                                               CORRECT_TO: 5}


def test_files_pulled_together_are_merged_one_block_each_in_order(home):
    csv(home, UPSERTS, "a.csv", [(APPEND, 1, "Oslo", 1)])
    csv(home, UPSERTS, "b.csv", [(APPEND, 1, "Oslo", 2), (APPEND, 2, "Lima", 2)])
    coord("pull", UPSERTS, cwd=home)
    state: dict[int, tuple] = {}
    first, second = slices(home, UPSERTS)
    assert units(first) == upserted(state, [(APPEND, 1, "Oslo", 1)])
    assert units(second) == upserted(state, [(APPEND, 1, "Oslo", 2), (APPEND, 2, "Lima", 2)])


def test_upserts_without_an_operation_type_column_are_all_upserts(home):
    name = "test.plain"
    coord("add", str(root(home, name, "{kind: UpsertStream, primaryKey: [id]}",
                          "['id BIGINT', 'city STRING', 'pop BIGINT']")), cwd=home)
    state: dict[int, tuple] = {}
    for i, rows in enumerate([[(1, "Oslo", 1), (2, "Lima", 2)], [(2, "Lima", 3), (1, "Oslo", 1)]]):
        csv(home, name, f"{i}.csv", rows, header="id,city,pop")
        coord("pull", name, cwd=home)
        assert units(slices(home, name)[-1]) == upserted(state, [(APPEND, *r) for r in rows])
    assert state_in_sql(home, name) == state == {1: ("Oslo", 1), 2: ("Lima", 3)}


def test_an_upsert_whose_own_event_time_alone_changed_is_a_correction(home):
    name = "test.timed"
    coord("add", str(root(home, name, "{kind: UpsertStream, primaryKey: [id]}",
                          "['id BIGINT', 'at TIMESTAMP', 'pop BIGINT']",
                          "    - kind: SetVocab\n      eventTimeColumn: at\n")), cwd=home)
    csv(home, name, "0.csv", [(1, "2020-01-01T00:00:00Z", 5), (2, "2020-01-01T00:00:00Z", 6)],
        header="id,at,pop")
    coord("pull", name, cwd=home)
    csv(home, name, "1.csv", [(1, "2020-02-01T00:00:00Z", 5), (2, "2020-01-01T00:00:00Z", 6)],
        header="id,at,pop")
    coord("pull", name, cwd=home)
    second = slices(home, name)[1].to_pylist()
    assert [(r["op"], r["id"], r["at"].month) for r in second] == [(CORRECT_FROM, 1, 1),
                                                                   (CORRECT_TO, 1, 2)]


CHANGE_PULLS = [
    [(APPEND, 1, "Oslo", 1), (APPEND, 2, "Lima", 2), (CORRECT_FROM, 1, "Oslo", 1),
     (CORRECT_TO, 1, "Oslo", 2)],
    [(RETRACT, 2, "Lima", 2), (APPEND, 3, "Kyiv", 3)],
    [(CORRECT_FROM, 3, "Kyiv", 3), (CORRECT_TO, 3, "Kyiv", 4), (APPEND, 2, "Lima", 5)],
]


def test_a_changelog_is_stored_as_given_and_its_state_projected(home):
    given: list[tuple] = []
    for i, rows in enumerate(CHANGE_PULLS):
        csv(home, CHANGES, f"{i}.csv", rows)
        coord("pull", CHANGES, cwd=home)
        assert units(slices(home, CHANGES)[-1]) == units(rows)
        given += rows
        assert state_in_sql(home, CHANGES) == projected(given)
    assert projected(given) == {1: ("Oslo", 2), 2: ("Lima", 5), 3: ("Kyiv", 4)}
    assert state_in_tail(home, CHANGES) == projected(given)
    assert "integrity: ok" in coord("verify", "--deep", CHANGES, cwd=home).stdout


@pytest.mark.parametrize("name, header, rows, message", [
    (CHANGES, "op,id,city,pop", [(APPEND, 5, "Rome", 5), (7, 6, "Bern", 6)],
     "row 2: column 'op': 7 is no operation type (0 append, 1 retract, 2 correct-from, "
     "3 correct-to)"),
    (CHANGES, "op,id,city,pop", [(APPEND, 5, "Rome", 5), (CORRECT_FROM, 1, "Oslo", 2),
                                 (APPEND, 6, "Bern", 6)],
     "row 2: column 'op': a correct-from row must be immediately followed by its correct-to row"),
    (CHANGES, "op,id,city,pop", [(APPEND, 5, "Rome", 5), ("", 6, "Bern", 6)],
     "row 2: column 'op' is null; give each record's operation type (0 append, 1 retract, "
     "2 correct-from, 3 correct-to)"),
    (CHANGES, "op,id,city,pop", [(APPEND, 5, "Rome", 5), (APPEND, "", "Bern", 6)],
     "row 2: primary key column 'id' is null"),
    (UPSERTS, "op,id,city,pop", [(APPEND, 5, "Rome", 5), (4, 6, "Bern", 6)],
     "row 2: column 'op': 4 is no operation type (0 append, 1 retract, 2 correct-from, "
     "3 correct-to)"),
])
def test_bad_stream_input_is_refused_naming_the_file_row_and_column(home, name, header, rows,
                                                                     message):
    csv(home, name, "0.csv", [(APPEND, 1, "Oslo", 1)])
    coord("pull", name, cwd=home)
    head = dataset(home, name).head()
    csv(home, name, "1.csv", rows, header)
    refused = coord("pull", name, cwd=home, check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1] == f"coord: error: {name}: 1.csv: {message}"
    assert dataset(home, name).head() == head  # nothing half-written


@pytest.mark.parametrize("merge", ["ChangelogStream", "UpsertStream"])
def test_a_missing_primary_key_column_is_refused_naming_the_file_and_column(home, merge):
    name = "test.keyed"
    coord("add", str(root(home, name, f"{{kind: {merge}, primaryKey: [key]}}")), cwd=home)
    csv(home, name, "0.csv", [(APPEND, 1, "Oslo", 1)])
    refused = coord("pull", name, cwd=home, check=False)
    assert refused.stderr.strip().splitlines()[-1] == (
        f"coord: error: {name}: 0.csv: primary key column 'key' is not in the data "
        "(columns: event_time, op, id, city, pop)")
    assert not dataset(home, name).state().slices


def test_a_changelog_without_its_operation_type_column_is_refused(home):
    name = "test.untyped"
    coord("add", str(root(home, name, "{kind: ChangelogStream, primaryKey: [id]}",
                          "['id BIGINT', 'city STRING', 'pop BIGINT']")), cwd=home)
    csv(home, name, "0.csv", [(1, "Oslo", 1)], header="id,city,pop")
    refused = coord("pull", name, cwd=home, check=False)
    assert refused.stderr.strip().splitlines()[-1] == (
        f"coord: error: {name}: 0.csv: a changelog stream gives each record's operation type in "
        "column 'op' (0 append, 1 retract, 2 correct-from, 3 correct-to); it is not in the data "
        "(columns: event_time, id, city, pop)")


@pytest.mark.parametrize("merge", ["ChangelogStream", "UpsertStream"])
def test_a_0_18_workspace_refuses_stream_merges_with_the_init_to_run(tmp_path, merge):
    coord("init", "--odf", "0.18", ".", cwd=tmp_path)
    path = root(tmp_path, "test.streamed", f"{{kind: {merge}, primaryKey: [id]}}")
    refused = coord("add", str(path), cwd=tmp_path, check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1] == (
        f"coord: error: {path}: content.metadata[0].merge: merge kind {merge} is not supported "
        "by ODF 0.18 workspaces (a 0.39 dataset merges them: make the workspace with coord init "
        "--odf 0.39)")


def test_pushed_files_are_upserted_one_block_each(home):
    name = "test.pushed"
    path = home / f"{name}.yaml"
    path.write_text(root_manifest(name, push_source(
        "feed", f"{{kind: Csv, header: true, ddlSchema: {COLUMNS}}}",
        "{kind: UpsertStream, primaryKey: [id]}")))
    coord("add", str(path), cwd=home)
    state: dict[int, tuple] = {}
    for i, rows in enumerate(UPSERT_PULLS[:4]):
        coord("ingest", name, str(csv(home, name, f"{i}.csv", rows)), cwd=home)
        assert units(slices(home, name)[-1]) == upserted(state, rows), f"push {i}"
    assert state_in_sql(home, name) == state == {1: ("Oslo", 8), 4: ("Pune", 7)}


# --- checked against the state ------------------------------------------------------------------

HELD = [(APPEND, 1, "Oslo", 1), (APPEND, 2, "Lima", 2), (APPEND, 3, "Kyiv", 3),
        (RETRACT, 3, "Kyiv", 3)]  # the changelog's first file: 1 and 2 held, 3 retracted


@pytest.mark.parametrize("rows, message", [
    ([(APPEND, 5, "Rome", 5), (RETRACT, 9, "Nowhere", 0)],
     "row 2: retracts the record of key {'id': 9}, which the dataset does not hold at that point"),
    ([(RETRACT, 3, "Kyiv", 3)],
     "row 1: retracts the record of key {'id': 3}, which the dataset does not hold at that point"),
    ([(RETRACT, 2, "Lima", 99)],
     "row 1: retracts the record of key {'id': 2} with pop 99, but the record held for it has 2"),
    # the first row refused is named, whatever is wrong with the rows after it
    ([(RETRACT, 2, "Lima", 99), (RETRACT, 9, "Nowhere", 0)],
     "row 1: retracts the record of key {'id': 2} with pop 99, but the record held for it has 2"),
    ([(CORRECT_FROM, 1, "Bergen", 1), (CORRECT_TO, 1, "Oslo", 5)],
     "row 1: corrects the record of key {'id': 1} with city 'Bergen', but the record held for it "
     "has 'Oslo'"),
    ([(CORRECT_FROM, 9, "Nowhere", 0), (CORRECT_TO, 9, "Nowhere", 1)],
     "row 1: corrects the record of key {'id': 9}, which the dataset does not hold at that point"),
    # held by the file's own records: 5 appended with 5, then retracted with other values
    ([(APPEND, 5, "Rome", 5), (RETRACT, 5, "Rome", 6)],
     "row 2: retracts the record of key {'id': 5} with pop 6, but the record held for it has 5"),
    ([(RETRACT, 1, "Oslo", 1), (RETRACT, 1, "Oslo", 1)],
     "row 2: retracts the record of key {'id': 1}, which the dataset does not hold at that point"),
    # a slice stores a key's records by operation type, as the reference: the append comes first
    ([(RETRACT, 1, "Oslo", 1), (APPEND, 1, "Oslo", 7)],
     "row 1: retracts the record of key {'id': 1} with pop 1, but the record held for it has 7 "
     "(a slice stores a key's records by operation type, appends first, then by event time, not "
     "in the file's order, as the reference does; put a key's later changes in a later file)"),
    ([(CORRECT_FROM, 1, "Oslo", 1), (CORRECT_TO, 2, "Oslo", 5)],
     "row 2: a correct-to row has the key {'id': 2} and its correct-from row another "
     "({'id': 1})"),
])
def test_a_changelog_record_not_matching_the_state_is_refused_and_nothing_written(home, rows,
                                                                                  message):
    csv(home, CHANGES, "0.csv", HELD)
    coord("pull", CHANGES, cwd=home)
    head = dataset(home, CHANGES).head()
    csv(home, CHANGES, "1.csv", rows)
    refused = coord("pull", CHANGES, cwd=home, check=False)
    assert refused.stderr.strip().splitlines()[-1] == f"coord: error: {CHANGES}: 1.csv: {message}"
    assert dataset(home, CHANGES).head() == head
    assert state_in_sql(home, CHANGES) == projected(HELD)


def test_a_changelog_retracting_what_its_own_records_hold_is_taken(home):
    csv(home, CHANGES, "0.csv", HELD)
    coord("pull", CHANGES, cwd=home)
    rows = [(APPEND, 3, "Kyiv", 4), (RETRACT, 3, "Kyiv", 4), (CORRECT_FROM, 2, "Lima", 2),
            (CORRECT_TO, 2, "Lima", 6), (RETRACT, 1, "Oslo", 1)]
    csv(home, CHANGES, "1.csv", rows)
    coord("pull", CHANGES, cwd=home)
    assert state_in_sql(home, CHANGES) == projected(HELD + rows) == {2: ("Lima", 6)}


def test_a_changelog_retraction_repeats_the_event_time_the_data_gives(home):
    name = "test.timed-changes"
    coord("add", str(root(home, name, "{kind: ChangelogStream, primaryKey: [id]}",
                          "['op INT', 'id BIGINT', 'at TIMESTAMP', 'pop BIGINT']",
                          "    - kind: SetVocab\n      eventTimeColumn: at\n")), cwd=home)
    csv(home, name, "0.csv", [(APPEND, 1, "2020-01-01T00:00:00Z", 5)], header="op,id,at,pop")
    coord("pull", name, cwd=home)
    csv(home, name, "1.csv", [(RETRACT, 1, "2020-02-01T00:00:00Z", 5)], header="op,id,at,pop")
    refused = coord("pull", name, cwd=home, check=False)
    assert refused.stderr.strip().splitlines()[-1] == (
        f"coord: error: {name}: 1.csv: row 1: retracts the record of key {{'id': 1}} with at "
        "2020-02-01T00:00:00Z, but the record held for it has 2020-01-01T00:00:00Z")
    csv(home, name, "1.csv", [(RETRACT, 1, "2020-01-01T00:00:00Z", 5)], header="op,id,at,pop")
    coord("pull", name, cwd=home)
    out = coord("sql", "-c", f'SELECT count(*) AS n FROM "{name}@state"', "-o", "json", cwd=home)
    assert json.loads(out.stdout) == [{"n": 0}]


@pytest.mark.parametrize("rows, message", [
    ([(APPEND, 5, "Rome", 5), (RETRACT, 9, "Nowhere", 0)],
     "row 2: deletes key {'id': 9}, which the dataset does not hold at that point"),
    ([(RETRACT, 2, "Lima", 2)],  # deleted by the file before
     "row 1: deletes key {'id': 2}, which the dataset does not hold at that point"),
    ([(RETRACT, 1, "Oslo", 0), (RETRACT, 1, "Oslo", 0)],
     "row 2: deletes key {'id': 1}, which the dataset does not hold at that point"),
])
def test_an_upsert_deleting_a_key_not_held_is_refused_and_nothing_written(home, rows, message):
    csv(home, UPSERTS, "0.csv", [(APPEND, 1, "Oslo", 1), (APPEND, 2, "Lima", 2)])
    csv(home, UPSERTS, "1.csv", [(RETRACT, 2, "Lima", 2)])
    coord("pull", UPSERTS, cwd=home)
    head = dataset(home, UPSERTS).head()
    csv(home, UPSERTS, "2.csv", rows)
    refused = coord("pull", UPSERTS, cwd=home, check=False)
    assert refused.stderr.strip().splitlines()[-1] == f"coord: error: {UPSERTS}: 2.csv: {message}"
    assert dataset(home, UPSERTS).head() == head
    assert state_in_sql(home, UPSERTS) == {1: ("Oslo", 1)}


def test_a_pushed_changelog_retracting_a_key_never_held_is_refused_naming_the_file(home):
    name = "test.pushed-changes"
    path = home / f"{name}.yaml"
    path.write_text(root_manifest(name, push_source(
        "feed", f"{{kind: Csv, header: true, ddlSchema: {COLUMNS}}}",
        "{kind: ChangelogStream, primaryKey: [id]}")))
    coord("add", str(path), cwd=home)
    coord("ingest", name, str(csv(home, name, "0.csv", HELD)), cwd=home)
    bad = csv(home, name, "1.csv", [(APPEND, 4, "Pune", 4), (RETRACT, 8, "Oslo", 1)])
    refused = coord("ingest", name, str(bad), cwd=home, check=False)
    assert refused.stderr.strip().splitlines()[-1] == (
        f"coord: error: {bad}: row 2: retracts the record of key {{'id': 8}}, which the "
        "dataset does not hold at that point")
    assert state_in_sql(home, name) == projected(HELD)
