"""A daily window over a dataset that joins readings with a station ledger with no time bound
emits its days once its inputs' watermarks pass them, and is corrected when a station added
later matches old readings (current ODF, ``lateRows: correct``, what ``coord add`` gives).

The join alone would keep both sides' rows forever and never give its readers a watermark, so
the window would never close. Instead the join is recomputed over its inputs' rows at each step
(its watermark the least of theirs), and the window, streamed until the join's late rows
arrive, is then recomputed too. One default workspace through the real coord command and the
shared Spark engine; after each pull the window's rows are checked against DuckDB.
"""
from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import yaml

from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.described_rows import described_rows
from .pipeline import manifest
from .test_chained_pull import root, write_csv

pytestmark = pytest.mark.spark

READINGS, STATIONS = "wx.readings", "wx.stations"
NAMED, DAILY = "wx.readings.named", "wx.readings.daily"
NAMED_SQL = f"""SELECT r.event_time, r.station, r.temp, s.name
FROM `{READINGS}` r JOIN `{STATIONS}` s ON r.station = s.station"""
DAILY_SQL = f"""SELECT window.end AS event_time, name, count(*) AS readings, sum(temp) AS total
FROM `{NAMED}` GROUP BY window(event_time, '1 day'), name"""
DUCKDB_DAILY = """SELECT time_bucket(INTERVAL 1 DAY, r.event_time) + INTERVAL 1 DAY AS event_time,
s.name, count(*) AS readings, sum(r.temp) AS total
FROM readings r JOIN stations s ON r.station = s.station GROUP BY ALL"""
T0 = datetime(2024, 1, 1, tzinfo=UTC)
# every six hours for four days, at stations 1 and 2
READING_ROWS = [{"event_time": T0 + timedelta(hours=6 * k), "station": 1 + k % 2, "temp": k}
                for k in range(16)]
FIRST_STATION = [{"event_time": T0, "station": 1, "name": "Oslo"}]
LATER_STATION = [{"event_time": T0 + timedelta(days=5), "station": 2, "name": "Lima"}]
FAR = datetime(2025, 1, 1, tzinfo=UTC)


def rows(home: Path, name: str) -> Counter:
    return described_rows(home, name, ("event_time", "name", "readings", "total"))


def daily(stations: list[dict], *, closed_by: datetime | None = None) -> Counter:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, found in (("readings", READING_ROWS), ("stations", stations)):
        con.register(name, pa.Table.from_pylist(found).cast(pa.Table.from_pylist(found).schema.set(
            0, pa.field("event_time", pa.timestamp("us", "UTC")))))
    return Counter(r for r in con.execute(DUCKDB_DAILY).fetchall()
                   if closed_by is None or r[0] <= closed_by)


def watermark(home: Path, name: str) -> datetime | None:
    return CurrentDataset(Workspace.open(home), name).state().watermark


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """Readings and the first station pulled, the ledger's watermark set far ahead."""
    home = tmp_path_factory.mktemp("window-behind-join")
    coord("init", cwd=home)
    folder = home / "manifests"
    folder.mkdir()
    sources = {
        READINGS: root("readings", ["event_time TIMESTAMP", "station BIGINT", "temp BIGINT"],
                       ["event_time", "station"]),
        STATIONS: root("stations", ["event_time TIMESTAMP", "station BIGINT", "name STRING"], ["station"]),
        NAMED: {"kind": "derivative", "inputs": [READINGS, STATIONS],
                "transform": {"kind": "sql", "engine": "spark", "query": NAMED_SQL}},
        DAILY: {"kind": "derivative", "inputs": [NAMED],
                "transform": {"kind": "sql", "engine": "spark", "query": DAILY_SQL}},
    }
    for name, source in sources.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(manifest(name, source)))
    coord("add", str(folder), cwd=home)
    write_csv(home, "readings", "1.csv", READING_ROWS)
    write_csv(home, "stations", "1.csv", FIRST_STATION)
    coord("pull", READINGS, STATIONS, cwd=home)
    coord("pull", STATIONS, "--set-watermark", FAR.isoformat(), cwd=home)
    return home


@pytest.fixture(scope="module")
def first_pull(home) -> str:
    return coord("pull", "-r", DAILY, cwd=home).stdout


@pytest.fixture(scope="module")
def station_added(home, first_pull) -> str:
    write_csv(home, "stations", "2.csv", LATER_STATION)
    coord("pull", STATIONS, cwd=home)
    return coord("pull", "-r", DAILY, cwd=home).stdout


def test_the_join_with_no_time_bound_is_recomputed_and_takes_its_inputs_watermark(home, first_pull):
    assert f"{NAMED}: 8 new records; its query holds rows back with no time bound" in first_pull
    assert watermark(home, NAMED) == watermark(home, READINGS)


def test_the_window_behind_it_emits_the_days_its_input_watermark_closed(home, first_pull):
    closed = daily(FIRST_STATION, closed_by=watermark(home, NAMED))
    assert len(closed) == 3  # the fourth day is still open
    assert rows(home, DAILY) == closed


def test_a_station_added_later_corrects_the_days_of_its_old_readings(home, station_added):
    assert rows(home, DAILY) == daily(FIRST_STATION + LATER_STATION)
    assert f"{DAILY}: " in station_added and "corrected its results (lateRows: correct)" in station_added


def test_the_window_was_streamed_then_recomputed(home, station_added):
    steps = [b.block.event for b in CurrentDataset(Workspace.open(home), DAILY).state().blocks
             if isinstance(b.block.event, e.ExecuteTransform)]
    assert [s.new_checkpoint is not None for s in steps] == [True, False]


@pytest.mark.parametrize("name", [NAMED, DAILY])
def test_verify_replays_both(home, station_added, name):
    assert "reproducibility: reproduced" in coord("verify", name, cwd=home).stdout
