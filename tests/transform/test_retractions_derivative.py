"""Derivatives over a current-ODF (0.39) input with retractions and corrections, through
``coord`` on a 0.39 workspace: a snapshot root whose rows are removed and changed, and
derivatives over it that pass its records on row by row.

- A filter and projection that carries the root's ``op`` and ``offset`` passes them on. The
  answer is computed apart, with DuckDB over the root's stored records: the filter applied to
  every record, a correct-from whose correct-to the filter dropped becoming a retraction and a
  correct-to whose correct-from it dropped an append. What a consumer of the output sees (its
  records applied as a multiset: appends and correct-tos add, retractions and correct-froms
  remove) must be the filter over the root's latest snapshot.
- A query that reads the root's system columns in a way that would tell a record from its
  retraction is refused before any data is processed, in one line naming the input, from the
  root's first pull on (its snapshot merge can retract: no retraction has to arrive first).
  Every other query is recomputed over the root's rows (test_recomputed_derivative.py).

The DuckDB test engine shows the logic; two tests run the same through Spark.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.manifests import csv_root_manifest, derivative_manifest, with_event_time

ROOT = "test.cities"
KEEP = "pop >= 20"  # the filter of the derivative under test
# Each pull's snapshot of the root (id, city, pop), and what it changes for the filter.
PULLS = [
    [(1, "Oslo", 10), (2, "Lima", 20), (3, "Pune", 30)],
    # 1 changed (both halves dropped), 2 removed, 4 new
    [(1, "Oslo", 11), (3, "Pune", 30), (4, "Kyiv", 40)],
    # 2 back, 3 changed (both halves kept), 1 removed (dropped), 5 new (dropped)
    [(2, "Lima", 21), (3, "Pune", 31), (4, "Kyiv", 40), (5, "Rome", 12)],
    # 2 changed, only its correct-from kept; 5 changed, only its correct-to kept
    [(2, "Lima", 15), (3, "Pune", 31), (4, "Kyiv", 40), (5, "Rome", 25)],
]
PASS_ON = f"SELECT op, `offset`, `at`, id, city FROM `{ROOT}` WHERE {KEEP}"


def root_manifest(home: Path, name: str, folder: str, merge: str, columns: list[str]) -> Path:
    path = home / f"{name}.yaml"
    path.write_text(csv_root_manifest(name, folder, columns, event_time="at", merge=merge))
    return path


def derivative(home: Path, name: str, query: str, inputs: tuple[str, ...] = (ROOT,)) -> None:
    path = home / f"{name}.yaml"
    path.write_text(with_event_time(derivative_manifest(name, list(inputs), query), "at"))
    coord("add", str(path), cwd=home)


def snapshot(home: Path, k: int) -> None:
    path = home / "in" / f"{k}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("id,city,pop\n" + "".join(f"{i},{c},{p}\n" for i, c, p in PULLS[k]))


def workspace(path: Path) -> Path:
    """A 0.39 workspace (``coord init``'s default) with the snapshot root, not pulled."""
    coord("init", str(path), cwd=path)
    columns = ["id BIGINT", "city STRING", "pop BIGINT"]
    coord("add", str(root_manifest(path, ROOT, "in", "{kind: snapshot, primaryKey: [id]}",
                                   columns)), cwd=path)
    return path


@pytest.fixture
def home(tmp_path) -> Path:
    return workspace(tmp_path)


@pytest.fixture(scope="module")
def passed_on(tmp_path_factory) -> Path:
    """The root pulled through every snapshot with ``test.large`` (PASS_ON) and ``test.all``
    (``SELECT *``, the same filter) pulled after each; the tests only read it."""
    home = workspace(tmp_path_factory.mktemp("passed-on"))
    derivative(home, "test.large", PASS_ON)
    derivative(home, "test.all", f"SELECT * FROM `{ROOT}` WHERE {KEEP}")
    pull_all(home, "test.large", "test.all", fake=True)
    return home


def records(home: Path, name: str) -> pa.Table:
    ds = CurrentDataset(Workspace.open(home), name)
    slices = [pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices]
    return pa.concat_tables(slices) if slices else pa.table({})


def expected(root: pa.Table) -> list[tuple]:
    """The filter over every record of the root, lone halves of a pair made whole, by DuckDB
    (a correct-from's partner is the record after it, a correct-to's the one before)."""
    con = duckdb.connect()
    con.register("root", root)
    rows = con.execute(f"""
        SELECT CASE WHEN op = 2 AND NOT lead({KEEP}) OVER w THEN 1
                    WHEN op = 3 AND NOT lag({KEEP}) OVER w THEN 0
                    ELSE op END, "at", id, city
        FROM root WINDOW w AS (ORDER BY "offset") QUALIFY {KEEP}""").fetchall()
    return sorted(rows)


def as_rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*(table[c].to_pylist() for c in ("op", "at", "id", "city")), strict=True))


def consumer_view(table: pa.Table) -> Counter:
    """The (id, city) rows the output's records leave, applied in offset order."""
    held: Counter = Counter()
    for r in table.sort_by("offset").to_pylist():
        held[(r["id"], r["city"])] += 1 if r["op"] in (0, 3) else -1
    assert all(n >= 0 for n in held.values()), "a record retracted before it was added"
    return +held


def pull_all(home: Path, *names: str, fake: bool) -> None:
    for k in range(len(PULLS)):
        snapshot(home, k)
        coord("pull", ROOT, cwd=home)
        coord("pull", *names, cwd=home, fake_engine=fake)


def check_passed_on(home: Path, name: str) -> None:
    root, out = records(home, ROOT), records(home, name)
    assert as_rows(out) == expected(root)
    latest = Counter((i, c) for i, c, p in PULLS[-1] if p >= 20)
    assert consumer_view(out) == latest


def test_a_filter_carrying_op_and_offset_passes_on_the_roots_retractions_and_corrections(passed_on):
    check_passed_on(passed_on, "test.large")
    ops = records(passed_on, "test.large")["op"].to_pylist()
    assert set(ops) == {0, 1, 2, 3}  # each kind made it through


def test_a_correction_the_filter_cut_in_half_becomes_a_retraction_or_an_append(passed_on):
    ds = CurrentDataset(Workspace.open(passed_on), "test.large")
    table = pq.read_table(ds.data_file(ds.state().slices[-1].slice))
    # the last pull: Lima 21 -> 15 (only the old half passes), Rome 12 -> 25 (only the new)
    assert {r["city"]: r["op"] for r in table.to_pylist()} == {"Lima": 1, "Rome": 0}


def test_select_star_carries_op_and_offset_and_the_output_is_renumbered(passed_on):
    out = records(passed_on, "test.all")
    assert as_rows(out) == expected(records(passed_on, ROOT))
    assert out["offset"].to_pylist() == list(range(out.num_rows))  # the output's own offsets


@pytest.mark.parametrize("name", ["test.large", "test.all"])
def test_verify_replays_the_passed_on_records(passed_on, name):
    assert "reproducibility: reproduced" in coord("verify", name, cwd=passed_on, fake_engine=True).stdout


def refused(home: Path, name: str, query: str, inputs: tuple[str, ...] = (ROOT,)) -> str:
    """Defines ``name`` as ``query``, pulls it after the root's first pull (appends only) and
    returns the one error line; nothing was committed."""
    derivative(home, name, query, inputs)
    snapshot(home, 0)
    coord("pull", ROOT, cwd=home)
    assert set(records(home, ROOT)["op"].to_pylist()) == {0}
    proc = coord("pull", name, cwd=home, check=False, fake_engine=True)
    assert proc.returncode == 1
    state = CurrentDataset(Workspace.open(home), name).state()
    assert not any(isinstance(b.block.event, e.ExecuteTransform) for b in state.blocks)
    [line] = proc.stderr.splitlines()
    return line


CAN_HOLD = f"input {ROOT} can hold retractions and corrections (its snapshot merge)"


def test_a_query_carrying_op_without_offset_is_refused(home):
    line = refused(home, "test.unordered", f"SELECT op, `at`, id, city FROM `{ROOT}` WHERE {KEEP}")
    assert f"{CAN_HOLD}; the output carries op but not offset" in line
    assert "select the input's offset unchanged too" in line


def test_a_filter_on_op_is_refused_as_it_could_keep_a_retraction_without_its_record(home):
    line = refused(home, "test.undone", f"SELECT op, `offset`, `at`, id, city FROM `{ROOT}` WHERE op <> 0")
    assert f"{CAN_HOLD}, which the query cannot pass on: it filters on op," in line
    assert "filter on the event time and data columns only" in line


def test_a_column_computed_from_op_is_refused_as_a_retraction_would_not_match_its_record(home):
    query = f"SELECT op, `offset`, `at`, id, op + 10 AS kind FROM `{ROOT}`"
    line = refused(home, "test.kinds", query)
    assert f"{CAN_HOLD}, which the query cannot pass on: its column kind is computed from op," in line


def test_an_aggregate_over_a_derivative_that_passes_them_on_is_recomputed(home):
    derivative(home, "test.large", PASS_ON)
    query = "SELECT max(`at`) AS `at`, count(*) AS n FROM `test.large` GROUP BY city"
    derivative(home, "test.counts", query, ("test.large",))
    pull_all(home, "test.large", "test.counts", fake=True)
    counts = records(home, "test.counts")
    held: Counter = Counter()
    for r in counts.to_pylist():
        held[r["n"]] += 1 if r["op"] == 0 else -1
    assert +held == Counter({1: sum(1 for _, _, p in PULLS[-1] if p >= 20)})  # one row per city


def test_a_derivative_of_an_append_only_root_is_not_asked_about_retractions(tmp_path):
    coord("init", str(tmp_path), cwd=tmp_path)
    columns = ["id BIGINT", "city STRING", "pop BIGINT"]
    coord("add", str(root_manifest(tmp_path, ROOT, "in", "{kind: append}", columns)), cwd=tmp_path)
    derivative(tmp_path, "test.plain", f"SELECT `at`, id, city FROM `{ROOT}` WHERE {KEEP}")
    snapshot(tmp_path, 0)
    coord("pull", ROOT, cwd=tmp_path)
    coord("pull", "test.plain", cwd=tmp_path, fake_engine=True)
    assert sorted(records(tmp_path, "test.plain")["city"].to_pylist()) == ["Lima", "Pune"]


# ----- the same through Spark -------------------------------------------------------------------


@pytest.mark.spark
def test_spark_passes_on_the_roots_retractions_and_corrections(home):
    derivative(home, "test.large", PASS_ON)
    pull_all(home, "test.large", fake=False)
    check_passed_on(home, "test.large")
