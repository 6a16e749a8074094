"""Hourly temperatures (a ledger root) joined as of each hour with an airport table (a snapshot
root: one airport renamed, one deleted, one inserted) through the real coord command, in a
0.18 workspace and in a default (current ODF) one, where the snapshot's changes are
retractions and corrections: pulled as the files arrive, then `--set-watermark` on the roots
releases the hours still waiting for the airports. The answer is computed independently by
hand: the airport's state at each hour."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord
from .pipeline import manifest
from .test_derivative_pull import records

pytestmark = pytest.mark.spark
TEMPS, AIRPORTS, ENRICHED = "wx.temps", "ref.airports", "wx.temps.enriched"
DAY = datetime(2024, 1, 1, tzinfo=UTC)
# (file date, snapshot): LAX is renamed on the 3rd, SFO deleted and JFK inserted on the 5th.
SNAPSHOTS = [
    (DAY, {"LAX": "Los Angeles", "SFO": "San Francisco", "SEA": "Seattle"}),
    (DAY + timedelta(days=2), {"LAX": "Los Angeles Intl", "SFO": "San Francisco", "SEA": "Seattle"}),
    (DAY + timedelta(days=4), {"LAX": "Los Angeles Intl", "SEA": "Seattle", "JFK": "New York"}),
]
HOURS = [(DAY + timedelta(hours=h), station)
         for h in range(0, 6 * 24, 5) for station in ("LAX", "SFO", "JFK")]

QUERY = f"""SELECT t.event_time, t.station, t.temp, a.name
FROM `{TEMPS}` AS t LEFT JOIN `{AIRPORTS}` FOR SYSTEM_TIME AS OF t.event_time AS a ON t.station = a.iata"""


def add_pipeline(home, more: dict[str, str] | None = None, odf: str = "0.18",
                 temps_merge: str = "ledger") -> None:
    """The three datasets, and ``more`` derivatives (id -> query) of the temperatures joined as
    of each hour with the airports."""
    coord("init", "--odf", odf, cwd=home)
    docs = {
        TEMPS: {"kind": "root", "fetch": {"kind": "filesGlob", "path": "temps/*.csv", "order": "byName"},
                "read": {"kind": "csv", "header": True,
                         "schema": ["event_time TIMESTAMP", "station STRING", "temp BIGINT"]},
                "merge": {"kind": temps_merge, "primaryKey": ["event_time", "station"]}},
        AIRPORTS: {"kind": "root",
                   "fetch": {"kind": "filesGlob", "path": "airports/*.csv", "order": "byName",
                             "eventTime": {"kind": "fromPath", "pattern": r"(\d{4}-\d\d-\d\d)\.csv"}},
                   "read": {"kind": "csv", "header": True, "schema": ["iata STRING", "name STRING"]},
                   "merge": {"kind": "snapshot", "primaryKey": ["iata"]}},
        ENRICHED: {"kind": "derivative", "inputs": [TEMPS, AIRPORTS],
                   "transform": {"kind": "sql", "engine": "spark", "query": QUERY,
                                 "temporalTables": [{"name": AIRPORTS, "primaryKey": ["iata"]}]}},
    }
    for dataset_id, query in (more or {}).items():
        docs[dataset_id] = {**docs[ENRICHED], "transform": {**docs[ENRICHED]["transform"], "query": query}}
    (home / "manifests").mkdir()
    for dataset_id, source in docs.items():
        (home / "manifests" / f"{dataset_id}.yaml").write_text(yaml.safe_dump(manifest(dataset_id, source)))
    coord("add", str(home / "manifests"), cwd=home)


def write_day(home, k: int) -> None:
    """The k-th snapshot file and the temperatures of the two days it starts."""
    day, airports = SNAPSHOTS[k]
    (home / "airports").mkdir(exist_ok=True)
    (home / "temps").mkdir(exist_ok=True)
    lines = ["iata,name", *(f"{code},{name}" for code, name in airports.items())]
    (home / "airports" / f"{day:%Y-%m-%d}.csv").write_text("\n".join(lines) + "\n")
    hours = [(t, s) for t, s in HOURS if day <= t < day + timedelta(days=2)]
    lines = ["event_time,station,temp", *(f"{t:%Y-%m-%dT%H:%M:%SZ},{s},{t.hour}" for t, s in hours)]
    (home / "temps" / f"{k}.csv").write_text("\n".join(lines) + "\n")


def name_at(moment: datetime, station: str) -> str | None:
    """The airport's name as the latest snapshot at or before ``moment`` has it."""
    return [names for day, names in SNAPSHOTS if day <= moment][-1].get(station)


def joined(home) -> list[tuple]:
    """(event time, station, name) of every record of the joined dataset, either version."""
    out = coord("sql", "-o", "json", "-c", f'SELECT event_time, station, name FROM "{ENRICHED}"',
                cwd=home).stdout
    return sorted((datetime.fromisoformat(r["event_time"].replace("Z", "+00:00")), r["station"],
                   r["name"]) for r in json.loads(out))


@pytest.mark.parametrize("odf", ["0.18", "0.39"])
def test_temporal_join_of_a_snapshot_root_through_pull(tmp_path, odf):
    home = tmp_path
    add_pipeline(home, odf=odf)
    for k in range(len(SNAPSHOTS)):
        write_day(home, k)
        coord("pull", "-r", ENRICHED, cwd=home)
    waiting = len(HOURS) - len(joined(home))
    assert waiting > 0  # the hours after the last snapshot wait for the airports' watermark

    far = (DAY + timedelta(days=30)).isoformat()
    for root_id in (TEMPS, AIRPORTS):
        coord("pull", root_id, "--set-watermark", far, cwd=home)
    coord("pull", ENRICHED, cwd=home)

    assert joined(home) == sorted((t, s, name_at(t, s)) for t, s in HOURS)
    # verify replays each step from its recorded checkpoint and gets the same records
    assert "reproducibility: reproduced" in coord("verify", ENRICHED, cwd=home).stdout


REFUSED = {  # a derivative per way of reading the airports otherwise than as of each hour
    "plain.join": f"SELECT t.event_time, t.station, a.name FROM `{TEMPS}` AS t JOIN `{AIRPORTS}` AS a "
                  "ON t.station = a.iata",
    "by.identifier": f"SELECT t.event_time, t.station, a.name FROM `{TEMPS}` AS t "
                     f"JOIN IDENTIFIER('`{AIRPORTS}`') AS a ON t.station = a.iata",
    "own.time": QUERY.replace("AS OF t.event_time", "AS OF a.event_time"),
}


def test_a_temporal_table_read_otherwise_is_refused_by_pull_in_one_line(tmp_path):
    add_pipeline(tmp_path, REFUSED)
    write_day(tmp_path, 0)
    coord("pull", TEMPS, AIRPORTS, cwd=tmp_path)
    for dataset_id in REFUSED:
        failed = coord("pull", dataset_id, cwd=tmp_path, check=False)
        assert failed.returncode != 0
        [line] = [x for x in failed.stderr.splitlines() if "temporal table" in x]
        assert dataset_id in line and f"temporal table {AIRPORTS}" in line and "step 0" in line
        assert "__odf" not in failed.stderr
        assert records(tmp_path, dataset_id) == []


def test_a_temporal_join_whose_streamed_input_retracts_is_recomputed(tmp_path):
    # its values are checked against DuckDB in test_temporal_corrections.py
    add_pipeline(tmp_path, odf="0.39", temps_merge="snapshot")
    write_day(tmp_path, 0)
    coord("pull", TEMPS, AIRPORTS, cwd=tmp_path)
    coord("pull", ENRICHED, cwd=tmp_path)
    state = CurrentDataset(Workspace.open(tmp_path), ENRICHED).state()
    assert state.slices and state.rules.last_data is not None
    assert state.rules.last_data.new_checkpoint is None  # recomputed: no streaming state
