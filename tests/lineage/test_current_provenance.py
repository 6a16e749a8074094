"""Record provenance (`coord provenance`) of current-ODF (0.39) derivatives through the shared
sandboxed Spark engine: output records named by offset, input records by dataset and offset.

One workspace: the root ``cities`` (two AddData, then a third after the first pulls) and two
derivatives over it, each pulled in two steps: ``big`` (a projection and filter: each record
made by one input record of the slices its step read) and ``daily`` (a daily window: a record
made by every input record of its day, whichever step read them). Every expected answer is
found with DuckDB over the root's stored records."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord
from ..support.odf39_datasets import append_rows, define_derivative, write_root

pytestmark = pytest.mark.spark

BIG = ("SELECT event_time, upper(city) AS city, population DIV 1000 AS thousands "
       "FROM cities WHERE population > 600000")
DAILY = ("SELECT window.end AS event_time, count(*) AS cities, sum(population) AS population "
         "FROM cities GROUP BY window(event_time, '1 day')")
MORE = [(datetime(2025, 3, 1, tzinfo=UTC), "Delhi", 32_941_000),
        (datetime(2025, 3, 1, 12, tzinfo=UTC), "Porto", 231_800),
        (datetime(2025, 3, 5, tzinfo=UTC), "Lima", 10_092_000)]


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Workspace:
    home = tmp_path_factory.mktemp("current-provenance")
    ws = Workspace.init(home, OdfVersion.V039)
    write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", home / "scratch")
    cities = CurrentDataset(ws, "cities").state().id
    define_derivative(ws, "big", {"cities": cities}, BIG)
    define_derivative(ws, "daily", {"cities": cities}, DAILY)
    coord("pull", "big", "daily", cwd=home)
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", home / "scratch", MORE)
    coord("pull", "big", "daily", cwd=home)
    return ws


def records(ws: Workspace, name: str) -> pa.Table:
    ds = CurrentDataset(ws, name)
    return pa.concat_tables([pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices])


def duckdb_over(ws: Workspace, sql: str) -> list[tuple]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name in ("cities", "big", "daily"):
        con.register(name, records(ws, name))
    return con.sql(sql).fetchall()


def provenance(ws: Workspace, *args: str) -> dict:
    return json.loads(coord("provenance", *args, "-o", "json", cwd=ws.root).stdout)


def inputs_of(record: dict) -> list[list[tuple[str, int]]]:
    return [[(i["dataset"], i["offset"]) for i in d["inputs"]] for d in record["derivations"]]


def test_a_projected_record_names_the_one_input_record_by_offset(ws):
    # Delhi came with the second step: its record is in big's second slice
    [(offset, city_offset)] = duckdb_over(
        ws, "SELECT b.\"offset\", c.\"offset\" FROM big b JOIN cities c ON b.city = upper(c.city) "
            "WHERE c.city = 'Delhi'")
    answer = provenance(ws, "big", "--offset", str(offset))
    [record] = answer["records"]
    assert record["offset"] == offset and record["values"]["city"] == "DELHI"
    assert inputs_of(record) == [[("cities", city_offset)]]
    [[made_from]] = [d["inputs"] for d in record["derivations"]]
    assert made_from["values"]["population"] == "32941000"  # JSON: 64-bit integers as text
    # where-provenance: the field lineage the pull kept says city is upper(cities.city)
    [derivation] = record["derivations"]
    assert {(c["column"], c["kind"], c["dataset"], c["field"], tuple(c["values"]))
            for c in derivation["columns"] if c["column"] == "city"} == \
        {("city", "transform", "cities", "city", ("Delhi",))}
    step = CurrentDataset(ws, "big").state().slices[-1]
    assert answer["block"] == str(step.block_hash)


def test_a_window_record_names_every_input_record_of_its_day_across_steps(ws):
    # 2025-03-01 holds Delhi and Porto, both read by the second step
    [(offset, day)] = duckdb_over(ws, "SELECT \"offset\", event_time FROM daily WHERE cities = 2 "
                                      "AND event_time > TIMESTAMP '2025-02-01'")
    expected = sorted(o for (o,) in duckdb_over(
        ws, f"SELECT \"offset\" FROM cities WHERE event_time >= TIMESTAMPTZ '{day}' - INTERVAL 1 DAY "
            f"AND event_time < TIMESTAMPTZ '{day}'"))
    assert len(expected) == 2
    [record] = provenance(ws, "daily", "--offset", str(offset))["records"]
    assert [sorted(o for _, o in d) for d in inputs_of(record)] == [expected]


def test_records_chosen_by_a_where_condition_over_their_columns(ws):
    block = CurrentDataset(ws, "big").state().slices[0].block_hash
    wanted = duckdb_over(ws, "SELECT \"offset\", city FROM big WHERE thousands > 5000 ORDER BY \"offset\"")
    answer = provenance(ws, "big", "--block", str(block), "--where", "thousands > 5000")
    first_slice = CurrentDataset(ws, "big").state().slices[0].slice.offset_interval
    assert [(r["offset"], r["values"]["city"]) for r in answer["records"]] == \
        [w for w in wanted if first_slice.start <= w[0] <= first_slice.end]
    text = coord("provenance", "big", "--block", str(block), "--where", "thousands > 5000",
                 cwd=ws.root).stdout
    assert "cities offset" in text and "made from 1 input record(s)" in text
