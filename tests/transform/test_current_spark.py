"""Current-ODF (0.39) derivatives through the real ``coord pull`` and the shared sandboxed Spark
engine: the engine reads 0.39 slices (offset, op, system_time, event time, data) by the input's
alias, and what it answers is committed as 0.39 slices. Answers are DuckDB's over the root's
stored records."""
from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord
from ..support.odf39_datasets import (
    append_rows,
    append_table,
    define_derivative,
    write_root,
    write_table_root,
)

pytestmark = pytest.mark.spark

MORE = [(datetime(2025, 3, 1, tzinfo=UTC), "Delhi", 32_941_000),
        (datetime(2025, 3, 2, tzinfo=UTC), "Porto", 231_800)]
PROJECTION = ("SELECT event_time, upper(city) AS city, population DIV 1000 AS thousands "
              "FROM cities WHERE population > 600000")
CAPITALS = pa.schema([("event_time", pa.timestamp("ms", tz="UTC")), ("city", pa.string()),
                      ("country", pa.string())])
JOIN = ("SELECT c.event_time, c.city, c.population, k.country "
        "FROM cities c JOIN capitals k ON c.city = k.city")
DAILY = ("SELECT window.end AS event_time, count(*) AS cities, sum(population) AS population "
         "FROM cities GROUP BY window(event_time, '1 day')")


@pytest.fixture
def ws(tmp_path) -> Workspace:
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", tmp_path / "scratch")
    return ws


def define(ws: Workspace, name: str, query: str) -> None:
    define_derivative(ws, name, {"cities": CurrentDataset(ws, "cities").state().id}, query)


def records(ws: Workspace, name: str) -> pa.Table:
    ds = CurrentDataset(ws, name)
    slices = ds.state().slices
    return pa.concat_tables([pq.read_table(ds.data_file(r.slice)) for r in slices])


def duckdb_over_root(ws: Workspace, sql: str) -> list[tuple]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("cities", records(ws, "cities"))
    return con.sql(sql).fetchall()


def root_more(ws: Workspace, batch: list[tuple], watermark: datetime | None = None) -> None:
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", batch,
                watermark=watermark)


def test_a_projection_and_filter_over_a_0_39_root_pulls_and_replays(ws):
    define(ws, "big", PROJECTION)
    coord("pull", "big", cwd=ws.root)
    root_more(ws, MORE)
    coord("pull", "big", cwd=ws.root)
    got = records(ws, "big")
    assert got.column_names == ["offset", "op", "system_time", "event_time", "city", "thousands"]
    assert got["offset"].to_pylist() == list(range(got.num_rows))
    expected = duckdb_over_root(ws, "SELECT event_time, upper(city), population // 1000 FROM cities "
                                    "WHERE population > 600000 ORDER BY event_time, city")
    assert sorted(zip(*(got[c].to_pylist() for c in ("event_time", "city", "thousands")),
                      strict=True)) == expected
    assert verify_folder(CurrentDataset(ws, "big").root) == []
    out = coord("verify", "big", cwd=ws.root).stdout
    assert "reproducibility: reproduced" in out


def test_a_daily_window_emits_the_days_the_inputs_watermark_closed(ws):
    define(ws, "daily", DAILY)
    coord("pull", "daily", cwd=ws.root)
    watermark = CurrentDataset(ws, "cities").state().watermark  # the root's recorded one
    expected = duckdb_over_root(ws, f"""
        SELECT time_bucket(INTERVAL 1 day, event_time) + INTERVAL 1 day AS event_end,
               count(*), sum(population)
        FROM cities GROUP BY event_end
        HAVING event_end <= TIMESTAMPTZ '{watermark.isoformat()}' ORDER BY event_end""")
    assert len(expected) == 3  # Jan 2 (two cities), Jan 3, Feb 2; Feb 4 is after the watermark
    got = records(ws, "daily")
    assert list(zip(*(got[c].to_pylist() for c in ("event_time", "cities", "population")),
                    strict=True)) == expected
    step = [b.block.event for b in CurrentDataset(ws, "daily").state().blocks
            if isinstance(b.block.event, e.ExecuteTransform)][-1]
    assert step.new_watermark == watermark

    # a watermark alone (no records) closes the last day
    root_more(ws, [], watermark=datetime(2025, 3, 1, tzinfo=UTC))
    assert "daily: 1 new records" in coord("pull", "daily", cwd=ws.root).stdout
    assert records(ws, "daily")["event_time"].to_pylist()[-1] == datetime(2025, 2, 4, tzinfo=UTC)


def capitals(*found: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(CAPITALS.names, r, strict=True)) for r in found],
                                schema=CAPITALS)


def test_a_join_of_two_0_39_roots_matches_rows_across_steps_through_its_checkpoint(ws):
    write_table_root(ws, "capitals", capitals(
        (datetime(2025, 1, 1, tzinfo=UTC), "Lisbon", "Portugal"),
        (datetime(2025, 1, 1, tzinfo=UTC), "Seoul", "South Korea")), ws.root / "scratch")
    define_derivative(ws, "capital-cities", {
        "cities": CurrentDataset(ws, "cities").state().id,
        "capitals": CurrentDataset(ws, "capitals").state().id}, JOIN)
    coord("pull", "capital-cities", cwd=ws.root)
    # Delhi first in one input, then (a step later) in the other: the engine finds the
    # earlier row in its state, which went through the packed checkpoint file
    root_more(ws, MORE)
    coord("pull", "capital-cities", cwd=ws.root)
    append_table(ws.meta / "datasets" / "capitals", ws.meta / "locks", ws.root / "scratch",
                 capitals((datetime(2025, 3, 5, tzinfo=UTC), "Delhi", "India")))
    assert "capital-cities: 1 new records" in coord("pull", "capital-cities", cwd=ws.root).stdout

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("cities", records(ws, "cities"))
    con.register("capitals", records(ws, "capitals"))
    expected = con.sql("SELECT c.event_time, c.city, c.population, k.country FROM cities c "
                       "JOIN capitals k ON c.city = k.city ORDER BY c.city").fetchall()
    assert [r[1] for r in expected] == ["Delhi", "Lisbon", "Seoul"]
    got = records(ws, "capital-cities")
    assert sorted(zip(*(got[c].to_pylist() for c in ("event_time", "city", "population", "country")),
                      strict=True), key=lambda r: r[1]) == expected
    assert len([b for b in CurrentDataset(ws, "capital-cities").state().blocks
                if isinstance(b.block.event, e.ExecuteTransform)]) == 3


def test_a_dataset_pulled_from_a_repository_the_reference_wrote_feeds_a_spark_derivative(tmp_path):
    """Issue 33's whole path: a repository as the reference's ``kamu push`` leaves it (unsigned,
    its own did:odf), pulled into a 0.39 workspace, a derivative added over it from a manifest,
    computed by Spark, verified by replay; the records are DuckDB's over the pulled ones."""
    repo = tmp_path / "reference-repo"
    write_root(repo / "cities", tmp_path / "locks", tmp_path / "scratch")
    home = tmp_path / "home"
    coord("init", "--odf", "0.39", str(home), cwd=tmp_path)
    coord("repo", "add", "ref", repo.as_uri(), cwd=home)
    assert "written by a tool that does not sign" in coord("pull", "ref/cities", cwd=home).stdout
    (home / "big.yaml").write_text(
        "apiVersion: 1\nkind: DatasetSnapshot\ncontent:\n  id: big\n  source:\n"
        "    kind: derivative\n    inputs: [cities]\n"
        f"    transform: {{kind: sql, engine: spark, query: \"{PROJECTION}\"}}\n")
    coord("add", str(home / "big.yaml"), cwd=home)
    ws = Workspace.open(home)
    assert CurrentDataset(ws, "big").state().transform.inputs[0].dataset_ref == \
        str(CurrentDataset(ws, "cities").state().id)  # the reference's id, not one of ours
    coord("pull", "big", cwd=home)
    got = records(ws, "big")
    expected = duckdb_over_root(ws, "SELECT event_time, upper(city), population // 1000 FROM cities "
                                    "WHERE population > 600000 ORDER BY event_time, city")
    assert sorted(zip(*(got[c].to_pylist() for c in ("event_time", "city", "thousands")),
                      strict=True)) == expected
    out = coord("verify", "big", cwd=home).stdout
    assert "integrity: ok" in out and "reproducibility: reproduced" in out
