"""Derivatives recomputed over inputs that retract and correct (a current-ODF snapshot root),
through ``coord pull`` in a default workspace: aggregates, DISTINCT, joins, unions, ORDER BY
... LIMIT, subqueries, and a derivative of such a derivative.

The rule checked after every step: the rows the derivative's change log describes (appends
add a row, retractions take one away) are its query over the rows its inputs' change logs
describe, computed apart by DuckDB over the root's CSV snapshot in force and the reference
root's files. The snapshots rename, remove, bring back and add cities.

The DuckDB test engine runs the logic; test_recomputed_spark.py runs the same through Spark.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.data.odf_slice import Vocabulary
from coordinator.data.row_changes import current_rows
from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.manifests import csv_root_manifest, derivative_manifest, with_event_time

# one worker builds the module's workspace (its pulls take half a minute), not each of them
pytestmark = pytest.mark.xdist_group("tests/transform/test_recomputed_derivative.py")

ROOT = "test.cities"
REGIONS = "test.regions"
# Each pull's snapshot of the root: (id, city, region code, pop, day)
SNAPSHOTS = [
    [(1, "Oslo", 1, 10, 1), (2, "Lima", 2, 20, 1), (3, "Pune", 3, 30, 2)],
    [(1, "Oslo", 1, 11, 1), (3, "Pune", 3, 30, 2), (4, "Kyiv", 1, 40, 3)],  # 1 changed, 2 gone, 4 new
    [(1, "Christiania", 1, 11, 1), (2, "Lima", 2, 21, 4), (3, "Pune", 3, 31, 2),
     (4, "Kyiv", 1, 40, 3), (5, "Rome", 2, 12, 4)],  # 1 renamed, 2 back, 3 changed, 5 new
    [(3, "Pune", 3, 31, 2), (5, "Rome", 2, 25, 4)],  # most gone
]
REGION_ROWS = [(1, "North"), (2, "South"), (3, "East")]

# name -> (Spark SQL of the derivative, DuckDB SQL of the same over `cities` and `regions`)
SHAPES = {
    "test.by-region": (
        f"SELECT min(day_time) AS day_time, region, count(*) AS n, sum(pop) AS pop "
        f"FROM `{ROOT}` GROUP BY region",
        "SELECT min(day_time) AS day_time, region, count(*) AS n, sum(pop) AS pop "
        "FROM cities GROUP BY region"),
    "test.regions-seen": (
        f"SELECT DISTINCT day_time, region FROM `{ROOT}`",
        "SELECT DISTINCT day_time, region FROM cities"),
    "test.joined": (
        f"SELECT c.day_time, c.city, r.name FROM `{ROOT}` c JOIN `{REGIONS}` r ON c.region = r.code",
        "SELECT c.day_time, c.city, r.name FROM cities c JOIN regions r ON c.region = r.code"),
    "test.both": (
        f"SELECT day_time, city FROM `{ROOT}` WHERE pop >= 20 "
        f"UNION ALL SELECT day_time, city FROM `{ROOT}` WHERE region = 1",
        "SELECT day_time, city FROM cities WHERE pop >= 20 "
        "UNION ALL SELECT day_time, city FROM cities WHERE region = 1"),
    "test.largest": (
        f"SELECT day_time, city, pop FROM `{ROOT}` ORDER BY pop DESC, city LIMIT 2",
        "SELECT day_time, city, pop FROM cities ORDER BY pop DESC, city LIMIT 2"),
    "test.above-average": (
        f"SELECT day_time, city FROM `{ROOT}` WHERE pop > (SELECT avg(pop) FROM `{ROOT}`)",
        "SELECT day_time, city FROM cities WHERE pop > (SELECT avg(pop) FROM cities)"),
    "test.plain": (
        f"SELECT day_time, city FROM `{ROOT}` WHERE pop >= 20",
        "SELECT day_time, city FROM cities WHERE pop >= 20"),
}
# a derivative of a recomputed derivative: regions with more than one city
CHAINED = ("test.big-regions", "SELECT day_time, region FROM `test.by-region` WHERE n > 1",
           "SELECT min(day_time) AS day_time, region FROM cities GROUP BY region HAVING count(*) > 1")


def root_manifest(home: Path, name: str, folder: str, merge: str, columns: list[str]) -> Path:
    path = home / f"{name}.yaml"
    path.write_text(csv_root_manifest(name, folder, columns, event_time="day_time", merge=merge))
    return path


def add_derivative(home: Path, name: str, query: str, inputs: list[str]) -> None:
    path = home / f"{name}.yaml"
    path.write_text(with_event_time(derivative_manifest(name, inputs, query), "day_time"))
    coord("add", str(path), cwd=home)


def write_snapshot(home: Path, k: int) -> None:
    path = home / "in" / f"{k}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("id,city,region,pop,day_time\n" + "".join(
        f"{i},{c},{r},{p},2024-01-0{d}T00:00:00Z\n" for i, c, r, p, d in SNAPSHOTS[k]))


def workspace(home: Path) -> Path:
    """A default (0.39) workspace: the snapshot root, the append-only regions root (pulled)."""
    coord("init", str(home), cwd=home)
    coord("add", str(root_manifest(home, ROOT, "in", "{kind: snapshot, primaryKey: [id]}",
                                   ["id BIGINT", "city STRING", "region BIGINT", "pop BIGINT",
                                    "day_time TIMESTAMP"])), cwd=home)
    (home / "reg").mkdir()
    (home / "reg" / "0.csv").write_text("code,name,day_time\n" + "".join(
        f"{c},{n},2024-01-01T00:00:00Z\n" for c, n in REGION_ROWS))
    coord("add", str(root_manifest(home, REGIONS, "reg", "{kind: append}",
                                   ["code BIGINT", "name STRING", "day_time TIMESTAMP"])), cwd=home)
    coord("pull", REGIONS, cwd=home)
    return home


def rows(home: Path, name: str) -> Counter:
    """The rows ``name``'s change log describes (system columns left out)."""
    ds = CurrentDataset(Workspace.open(home), name)
    slices = [pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices]
    if not slices:
        return Counter()
    table = current_rows(pa.concat_tables(slices), Vocabulary(event_time="day_time"))
    return Counter(zip(*(c.to_pylist() for c in table.columns), strict=True))


def expected(home: Path, k: int, sql: str) -> Counter:
    """``sql`` in DuckDB over snapshot ``k``'s CSV file (`cities`) and the regions (`regions`)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"CREATE VIEW cities AS SELECT id, city, region, pop, day_time::TIMESTAMPTZ AS day_time "
                f"FROM read_csv('{home / 'in' / f'{k}.csv'}')")
    con.execute(f"CREATE VIEW regions AS SELECT * FROM read_csv('{home / 'reg' / '0.csv'}')")
    return Counter(con.execute(sql).fetchall())


def pull_step_by_step(home: Path, names: list[str], checks: dict[str, str], *, fake: bool) -> None:
    """Each snapshot pulled into the root, then ``names`` pulled; after each, every dataset of
    ``checks`` holds what its DuckDB query gives over that snapshot."""
    for k in range(len(SNAPSHOTS)):
        write_snapshot(home, k)
        coord("pull", ROOT, cwd=home)
        coord("pull", *names, cwd=home, fake_engine=fake)
        for name, sql in checks.items():
            assert rows(home, name) == expected(home, k, sql), f"{name} after snapshot {k}"


@pytest.fixture(scope="module")
def pulled(tmp_path_factory) -> Path:
    """Every shape and the chained derivative pulled after each snapshot, each checked then."""
    home = workspace(tmp_path_factory.mktemp("recomputed"))
    for name, (query, _) in SHAPES.items():
        add_derivative(home, name, query, [ROOT, REGIONS] if REGIONS in query else [ROOT])
    add_derivative(home, CHAINED[0], CHAINED[1], ["test.by-region"])
    checks = {name: sql for name, (_, sql) in SHAPES.items()} | {CHAINED[0]: CHAINED[2]}
    pull_step_by_step(home, [*SHAPES, CHAINED[0]], checks, fake=True)
    return home


@pytest.mark.parametrize("name", [*SHAPES, CHAINED[0]])
def test_after_every_snapshot_the_derivatives_rows_are_its_query_over_the_roots_rows(pulled, name):
    # the fixture checked every step; the last one again, here, by name
    sql = CHAINED[2] if name == CHAINED[0] else SHAPES[name][1]
    assert rows(pulled, name) == expected(pulled, len(SNAPSHOTS) - 1, sql)


def test_a_row_that_changes_is_retracted_with_its_old_values_and_appended_anew(pulled):
    ds = CurrentDataset(Workspace.open(pulled), "test.by-region")
    first, second = (pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices[:2])
    # snapshot 1: Lima (South) gone, Oslo's pop 10 -> 11 and Kyiv new (North)
    changed = {(r["op"], r["region"], r["n"], r["pop"]) for r in second.to_pylist()}
    assert changed == {(1, 1, 1, 10), (0, 1, 2, 51), (1, 2, 1, 20)}
    assert set(first["op"].to_pylist()) == {0}


def test_a_recomputed_step_keeps_no_checkpoint(pulled):
    steps = [b.block.event for b in CurrentDataset(Workspace.open(pulled), "test.by-region").state().blocks
             if isinstance(b.block.event, e.ExecuteTransform)]
    assert steps and all(s.new_checkpoint is None and s.prev_checkpoint is None for s in steps)


def test_a_step_that_changes_no_row_writes_no_record(pulled, tmp_path):
    # the root's last snapshot again: the root commits nothing new, nor do the derivatives
    heads = {n: CurrentDataset(Workspace.open(pulled), n).head() for n in SHAPES}
    out = coord("pull", *SHAPES, cwd=pulled, fake_engine=True).stdout
    assert all(f"{n}: up to date" in out for n in SHAPES)
    assert heads == {n: CurrentDataset(Workspace.open(pulled), n).head() for n in SHAPES}


@pytest.mark.parametrize("name", ["test.by-region", "test.joined", CHAINED[0]])
def test_verify_replays_the_recomputed_steps(pulled, name):
    out = coord("verify", name, cwd=pulled, fake_engine=True).stdout
    assert "reproducibility: reproduced" in out


@pytest.mark.parametrize("name", ["test.by-region", "test.largest", CHAINED[0]])
def test_invariance_compares_the_rows_the_steps_leave_with_one_step_over_everything(pulled, name):
    out = coord("verify", name, "--invariance", cwd=pulled, fake_engine=True).stdout
    assert f"{name}: invariant" in out


def test_the_output_watermark_is_the_least_input_watermark(pulled):
    ws = Workspace.open(pulled)
    root, regions = (CurrentDataset(ws, n).state().watermark for n in (ROOT, REGIONS))
    assert CurrentDataset(ws, "test.joined").state().watermark == min(root, regions)


def test_all_snapshots_at_once_give_the_same_rows_as_one_by_one(pulled, tmp_path):
    home = workspace(tmp_path)
    add_derivative(home, "test.by-region", SHAPES["test.by-region"][0], [ROOT])
    for k in range(len(SNAPSHOTS)):
        write_snapshot(home, k)
        coord("pull", ROOT, cwd=home)
    coord("pull", "test.by-region", cwd=home, fake_engine=True)
    assert rows(home, "test.by-region") == rows(pulled, "test.by-region")


def test_a_query_reading_the_op_of_an_input_it_aggregates_is_refused(tmp_path):
    home = workspace(tmp_path)
    add_derivative(home, "test.ops", f"SELECT max(day_time) AS day_time, op, count(*) AS n "
                                     f"FROM `{ROOT}` GROUP BY op", [ROOT])
    write_snapshot(home, 0)
    coord("pull", ROOT, cwd=home)
    proc = coord("pull", "test.ops", cwd=home, check=False, fake_engine=True)
    assert proc.returncode == 1
    assert "the query runs over the rows its inputs' change logs describe, which have no op" in proc.stderr
    assert not CurrentDataset(Workspace.open(home), "test.ops").state().slices


def test_a_derivative_keeps_each_datasets_rows_as_of_the_last_block_its_steps_read(pulled):
    # the root's as of its newest block; its own as its newest step started from them
    ws = Workspace.open(pulled)
    kept = sorted(p.name for p in (ws.meta / "cache" / "test.by-region" / "held-rows").iterdir())
    root, own = (CurrentDataset(ws, n).state().slices for n in (ROOT, "test.by-region"))
    assert kept == sorted([f"{ROOT}@{root[-1].block_hash}.parquet",
                           f"test.by-region@{own[-2].block_hash}.parquet"])


def test_kept_rows_that_cannot_be_read_are_folded_again_from_every_slice(tmp_path):
    home = workspace(tmp_path)
    query, sql = SHAPES["test.by-region"]
    add_derivative(home, "test.by-region", query, [ROOT])
    pull_step_by_step(home, ["test.by-region"], {}, fake=True)
    for kept in (Workspace.open(home).meta / "cache" / "test.by-region" / "held-rows").iterdir():
        kept.write_bytes(b"not a Parquet file")
    (home / "in" / "4.csv").write_text((home / "in" / "0.csv").read_text())  # the first again
    coord("pull", ROOT, cwd=home)
    coord("pull", "test.by-region", cwd=home, fake_engine=True)
    assert rows(home, "test.by-region") == expected(home, 4, sql)
