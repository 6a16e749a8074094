"""The derivatives of test_recomputed_derivative.py recomputed through the real engine: every
shape, two daily windows (one behind a join) and the chained derivative pulled through Spark
after each snapshot of the root that renames, removes, brings back and adds cities, each
checked against DuckDB over the snapshot in force; changes written as the reference writes
them; steps replayed by `coord verify`.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord
from .test_recomputed_derivative import (
    CHAINED,
    REGIONS,
    ROOT,
    SHAPES,
    SNAPSHOTS,
    add_derivative,
    expected,
    pull_step_by_step,
    rows,
    workspace,
)

pytestmark = pytest.mark.spark

WINDOWS = {
    "test.daily": (
        f"SELECT window.start AS day_time, region, count(*) AS n, sum(pop) AS pop FROM `{ROOT}` "
        "GROUP BY window(day_time, '1 day'), region",
        "SELECT time_bucket(INTERVAL 1 DAY, day_time) AS day_time, region, count(*), sum(pop) "
        "FROM cities GROUP BY ALL"),
    "test.daily-named": (
        f"SELECT window.start AS day_time, r.name, count(*) AS n FROM `{ROOT}` c "
        f"JOIN `{REGIONS}` r ON c.region = r.code GROUP BY window(c.day_time, '1 day'), r.name",
        "SELECT time_bucket(INTERVAL 1 DAY, c.day_time) AS day_time, r.name, count(*) "
        "FROM cities c JOIN regions r ON c.region = r.code GROUP BY ALL"),
}


@pytest.fixture(scope="module")
def spark_pulled(tmp_path_factory) -> Path:
    """Every shape, two windows (one behind a join) and the chained derivative pulled through
    Spark after each snapshot, each checked against DuckDB then."""
    home = workspace(tmp_path_factory.mktemp("recomputed-spark"))
    shapes = SHAPES | WINDOWS
    for name, (query, _) in shapes.items():
        add_derivative(home, name, query, [ROOT, REGIONS] if REGIONS in query else [ROOT])
    add_derivative(home, CHAINED[0], CHAINED[1], ["test.by-region"])
    checks = {name: sql for name, (_, sql) in shapes.items()} | {CHAINED[0]: CHAINED[2]}
    pull_step_by_step(home, [*shapes, CHAINED[0]], checks, fake=False)
    return home


@pytest.mark.parametrize("name", [*SHAPES, *WINDOWS, CHAINED[0]])
def test_spark_keeps_every_shape_equal_to_its_query_after_every_snapshot(spark_pulled, name):
    # the fixture checked every step; the last one again, here, by name
    sql = CHAINED[2] if name == CHAINED[0] else (SHAPES | WINDOWS)[name][1]
    assert rows(spark_pulled, name) == expected(spark_pulled, len(SNAPSHOTS) - 1, sql)


def test_spark_writes_a_region_whose_population_changes_as_a_correction(spark_pulled):
    ds = CurrentDataset(Workspace.open(spark_pulled), "test.by-region")
    second = pq.read_table(ds.data_file(ds.state().slices[1].slice)).to_pylist()
    # snapshot 1: Lima (South) gone, Oslo's pop 10 -> 11 and Kyiv new (North)
    assert [(r["op"], r["region"], r["n"], r["pop"]) for r in second] == [
        (1, 2, 1, 20), (2, 1, 1, 10), (3, 1, 2, 51)]


@pytest.mark.parametrize("name", ["test.daily-named", CHAINED[0]])
def test_spark_replays_the_recomputed_steps(spark_pulled, name):
    assert "reproducibility: reproduced" in coord("verify", name, cwd=spark_pulled).stdout


def test_steps_written_without_pairs_replay_through_the_engine_that_writes_pairs(tmp_path):
    # the test engine names no key, so each changed group is written as a retraction and an
    # append, as every recomputed step was before steps wrote pairs; Spark names the key
    home = workspace(tmp_path)
    query = (f"SELECT min(day_time) AS day_time, region, count(*) AS n, max(pop) AS top FROM `{ROOT}` "
             "GROUP BY region")
    add_derivative(home, "test.top", query, [ROOT])
    pull_step_by_step(home, ["test.top"], {}, fake=True)
    ds = CurrentDataset(Workspace.open(home), "test.top")
    ops = {op for r in ds.state().slices for op in pq.read_table(ds.data_file(r.slice))["op"].to_pylist()}
    assert ops == {0, 1}
    assert "reproducibility: reproduced" in coord("verify", "test.top", cwd=home).stdout
