"""Record provenance (`coord provenance`) through temporal joins, on issue 31's pipeline.

Hourly temperatures (a ledger root) joined as of each hour with an airport table (a snapshot
root: LAX renamed on the 3rd, SFO deleted and JFK inserted on the 5th), pulled as the files
arrive, then released by a watermark on the roots (tests/transform/test_temporal_pull.py).
A record of the join comes from its hour's temperature and the airport row that started the
version in force at that hour: the expected rows are found by DuckDB's ASOF JOIN over the
roots' own slices (block, row), a removal ending its key."""
from __future__ import annotations

import json
from datetime import timedelta

import duckdb
import pyarrow as pa
import pytest

from tests.lineage.test_provenance import inputs_of, provenance, rows_of
from tests.support.cli import coord
from tests.transform.test_temporal_pull import (
    AIRPORTS,
    DAY,
    ENRICHED,
    SNAPSHOTS,
    TEMPS,
    add_pipeline,
    write_day,
)

pytestmark = pytest.mark.spark
DAILY = "wx.temps.daily"
DAILY_QUERY = f"""SELECT window.end AS event_time, a.name, count(*) AS n, sum(t.temp) AS temp
FROM `{TEMPS}` AS t JOIN `{AIRPORTS}` FOR SYSTEM_TIME AS OF t.event_time AS a ON t.station = a.iata
GROUP BY window(t.event_time, '1 day'), a.name"""


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("provenance-temporal")
    add_pipeline(home, {DAILY: DAILY_QUERY})
    for k in range(len(SNAPSHOTS)):
        write_day(home, k)
        coord("pull", "-r", ENRICHED, DAILY, cwd=home)
    far = (DAY + timedelta(days=30)).isoformat()
    for root_id in (TEMPS, AIRPORTS):
        coord("pull", root_id, "--set-watermark", far, cwd=home)
    coord("pull", ENRICHED, DAILY, cwd=home)
    return home


def as_of_sources(home) -> duckdb.DuckDBPyConnection:
    """DuckDB over the roots' records (with their block and row): ``sources`` has, per hour
    and station, its temperature's (block, row) and the airport version's (none: no version,
    or a removal)."""
    con = duckdb.connect()
    for name, dataset_id in (("t", TEMPS), ("a", AIRPORTS)):
        found = rows_of(home, dataset_id)
        table = pa.Table.from_pylist([values for _, _, values in found])
        con.register(name, table.append_column("block", pa.array([b for b, _, _ in found]))
                     .append_column("row", pa.array([r for _, r, _ in found], pa.int64())))
    con.execute("""CREATE VIEW sources AS
        SELECT t.event_time, t.station, t.block, t.row,
               CASE WHEN a.observed = 'D' THEN NULL ELSE a.name END AS name,
               CASE WHEN a.observed = 'D' THEN NULL ELSE a.block END AS a_block, a.row AS a_row
        FROM t ASOF LEFT JOIN a ON t.station = a.iata AND t.event_time >= a.event_time""")
    return con


def test_each_joined_hour_comes_from_its_temperature_and_the_airport_version_of_that_hour(home):
    con = as_of_sources(home)
    expected = {}
    for r in con.sql("SELECT * FROM sources").to_arrow_table().to_pylist():
        airport = {(AIRPORTS, r["a_block"], r["a_row"])} if r["a_block"] else set()
        expected[(r["event_time"], r["station"])] = {(TEMPS, r["block"], r["row"])} | airport
    names = {(r[0], r[1]): r[2] for r in con.sql("SELECT event_time, station, name FROM sources").fetchall()}
    # the changes, each met: a rename, a deletion (left join: no airport), an insertion
    assert {names[(DAY + timedelta(hours=h), "LAX")] for h in (45, 50)} == {"Los Angeles", "Los Angeles Intl"}
    assert names[(DAY + timedelta(hours=95), "SFO")] == "San Francisco"
    assert names[(DAY + timedelta(hours=100), "SFO")] is None
    assert names[(DAY + timedelta(hours=100), "JFK")] == "New York"

    joined = rows_of(home, ENRICHED)
    assert len({block for block, _, _ in joined}) > 1  # hours joined in several pulls
    got = {}
    for block in dict.fromkeys(block for block, _, _ in joined):  # each replayed over its inputs then
        for record in provenance(home, ENRICHED, "--block", block)["records"]:
            [derivation] = record["derivations"]
            got[(block, record["row"])] = inputs_of(derivation)
    assert got == {(block, row): expected[(values["event_time"], values["station"])]
                   for block, row, values in joined}


def test_a_day_behind_a_temporal_join_comes_from_its_hours_and_the_one_version_they_met(home):
    renamed = DAY + timedelta(days=2)  # LAX is "Los Angeles Intl" from this day on
    [(block, row, record)] = [r for r in rows_of(home, DAILY)
                              if r[2]["event_time"] == renamed + timedelta(days=1)
                              and r[2]["name"] == "Los Angeles Intl"]
    con = as_of_sources(home)
    hours = con.sql("SELECT block, row, a_block, a_row, hour(event_time) AS h FROM sources "
                    "WHERE station = 'LAX' AND event_time >= ? AND event_time < ?",
                    params=[renamed, renamed + timedelta(days=1)]).fetchall()
    assert (record["n"], record["temp"]) == (len(hours), sum(h for *_, h in hours))
    [version] = {(a_block, a_row) for _, _, a_block, a_row, _ in hours}  # the renaming row

    text = coord("provenance", DAILY, "--block", block, "--row", str(row), cwd=home).stdout
    assert f"made from {len(hours) + 1} input record(s)" in text
    answer = json.loads(coord("provenance", DAILY, "--block", block, "--row", str(row), "-o", "json",
                              cwd=home).stdout)
    [derivation] = answer["records"][0]["derivations"]
    assert inputs_of(derivation) == {(TEMPS, b, r) for b, r, *_ in hours} | {(AIRPORTS, *version)}
    [name] = [c for c in derivation["columns"] if c["column"] == "name"]
    assert (name["dataset"], name["values"]) == (AIRPORTS, ["Los Angeles Intl"])
