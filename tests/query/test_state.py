"""A snapshot or ledger root read as the table it describes (``"<id>@state"`` in ``coord sql``,
``coord tail --state``), now, as of an event time and as at a system time.

The expected states are the snapshot files themselves (read by pandas: a snapshot is the
table as it stood) and, for the ledger, pandas' latest record per key by event time; the
datasets are real roots pulled from Parquet files (no engine needed)."""
from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.cli import coord
from tests.support.snapshots import AIRPORTS, SEEN, SNAPSHOTS, manifest, pull_airports, snapshot

NAMES = "ref.names"
# a ledger's two exports; the second brings, for AAA, a record of an earlier event time
LEDGER = [
    {"iata": ["AAA", "BBB"], "name": ["Alpha new", "Bravo"],
     "event_time": ["2020-03-01T00:00:00Z", "2020-01-01T00:00:00Z"]},
    {"iata": ["AAA", "BBB", "CCC"], "name": ["Alpha old", "Bravo 2", "Charlie"],
     "event_time": ["2020-01-15T00:00:00Z", "2020-02-01T00:00:00Z", "2020-01-01T00:00:00Z"]},
]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """The snapshot root (one block per snapshot), the same files as an append root, and a
    ledger keyed on (iata, name) whose key was then narrowed to iata (``coord add --replace``)."""
    home = tmp_path_factory.mktemp("state")
    coord("init", "--odf", "0.18", cwd=home)
    pull_airports(home)
    (home / "ledger").mkdir()
    pq.write_table(pa.table(LEDGER[0]), home / "ledger" / "export-1.parquet")
    ledger = manifest(NAMES, "ledger/*.parquet", "{kind: ledger, primaryKey: [iata, name]}", "",
                      '["iata STRING", "name STRING", "event_time STRING"]')
    (home / "names.yaml").write_text(ledger)
    coord("add", "names.yaml", cwd=home)
    coord("pull", NAMES, cwd=home)
    pq.write_table(pa.table(LEDGER[1]), home / "ledger" / "export-2.parquet")
    coord("pull", NAMES, cwd=home)
    (home / "names.yaml").write_text(ledger.replace("[iata, name]", "[iata]"))
    coord("add", "--replace", "names.yaml", cwd=home)
    return home


def sql_json(home, query: str, *args: str) -> list[dict]:
    return json.loads(coord("sql", "-o", "json", "-c", query, *args, cwd=home).stdout)


def state(home, *args: str) -> list[dict]:
    return sql_json(home, f'SELECT iata, name FROM "{AIRPORTS}@state" ORDER BY iata', *args)


def refusal(home, *args: str) -> str:
    proc = coord(*args, cwd=home, check=False)
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


def data_blocks(home, dataset: str) -> list[dict]:
    """The blocks that added records, oldest first."""
    return [b for b in json.loads(coord("log", dataset, "-o", "json", cwd=home).stdout)[::-1]
            if b.get("outputSlice")]


def test_the_state_is_the_last_snapshot_after_a_rename_a_delete_and_an_insert(home):
    assert state(home) == snapshot("2020-04-01")
    assert sql_json(home, f'SELECT count(*) AS n FROM "{AIRPORTS}@state"') == [{"n": 4}]


def test_the_change_log_stays_the_datasets_own_table(home):
    # by hand: 4 inserts, the rename, the delete of CCC, the insert of EEE
    rows = sql_json(home, f'SELECT observed, count(*) AS n FROM "{AIRPORTS}" GROUP BY 1 ORDER BY 1')
    assert rows == [{"observed": "D", "n": 1}, {"observed": "I", "n": 5}, {"observed": "U", "n": 1}]


@pytest.mark.parametrize(("as_of", "expected"), [
    ("2019-12-31T23:59:59Z", []),
    ("2020-01-01T00:00:00Z", snapshot("2020-01-01")),
    ("2020-02-15T00:00:00Z", snapshot("2020-02-01")),
    ("2020-03-31T00:00:00Z", snapshot("2020-03-01")),
    ("2030-01-01T00:00:00Z", snapshot("2020-04-01")),
])
def test_as_of_an_event_time_the_state_is_the_snapshot_of_then(home, as_of, expected):
    assert state(home, "--as-of", as_of) == expected


def test_as_at_a_system_time_the_state_is_what_the_workspace_held_then(home):
    blocks = data_blocks(home, AIRPORTS)
    assert [state(home, "--as-at", b["systemTime"]) for b in blocks] == [
        snapshot(day) for day in SNAPSHOTS]
    assert state(home, "--as-at", blocks[1]["blockHash"][:12]) == snapshot("2020-02-01")
    before = refusal(home, "sql", "--as-at", "2000-01-01T00:00:00Z",
                     "-c", f'SELECT * FROM "{AIRPORTS}@state"')
    assert f"dataset {AIRPORTS} holds no data as at 2000-01-01T00:00:00Z" in before


def test_as_at_and_as_of_together_bound_both_times(home):
    second = data_blocks(home, AIRPORTS)[1]["systemTime"]
    assert state(home, "--as-at", second, "--as-of", "2020-01-15T00:00:00Z") == snapshot("2020-01-01")


def test_a_ledgers_state_is_its_latest_record_per_key_by_event_time(home):
    records = pd.concat([pd.DataFrame(export) for export in LEDGER])
    latest = records.sort_values("event_time").groupby("iata").last().reset_index()
    rows = sql_json(home, f'SELECT iata, name FROM "{NAMES}@state" ORDER BY iata')
    assert rows == latest[["iata", "name"]].to_dict("records")
    assert rows[0] == {"iata": "AAA", "name": "Alpha new"}  # stored first, but the latest event


def test_a_dataset_without_a_primary_key_has_no_state(home):
    expected = (f"coord: error: dataset {SEEN} has no state: its merge strategy is append, so it has "
                "no primary key to project its records on")
    assert refusal(home, "sql", "-c", f'SELECT * FROM "{SEEN}@state"').startswith(expected)
    assert refusal(home, "tail", SEEN, "--state").startswith(expected)


def test_tail_state_shows_the_rows_whose_versions_were_recorded_last(home):
    rows = json.loads(coord("tail", AIRPORTS, "--state", "-n", "2", "-o", "json", cwd=home).stdout)
    # stored order of the current versions: AAA, DDD (2020-01-01), BBB (renamed), EEE (inserted)
    assert [(r["iata"], r["name"], r["observed"]) for r in rows] == [("BBB", "Bravo Intl", "U"),
                                                                     ("EEE", "Echo", "I")]


def test_tail_state_as_of_and_as_at(home):
    def tail(*args: str) -> list[tuple[str, str]]:
        out = coord("tail", AIRPORTS, "--state", "-n", "10", "-o", "json", *args, cwd=home).stdout
        return sorted((r["iata"], r["name"]) for r in json.loads(out))

    as_pairs = [tuple(r.values()) for r in snapshot("2020-02-01")]
    assert tail("--as-of", "2020-02-15T00:00:00Z") == as_pairs
    assert tail("--as-at", data_blocks(home, AIRPORTS)[1]["systemTime"]) == as_pairs
    assert tail("--as-of", "2019-01-01T00:00:00Z") == []


def test_tail_as_of_without_state_is_a_usage_error(home):
    proc = coord("tail", AIRPORTS, "--as-of", "2020-01-01T00:00:00Z", cwd=home, check=False)
    assert proc.returncode == 2 and "--as-of reads a state: give --state" in proc.stderr
