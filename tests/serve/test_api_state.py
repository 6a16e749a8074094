"""The API reads a snapshot root's state as ``coord sql`` and ``coord tail --state`` do:
``/api/sql`` with ``"<id>@state"`` and ``as_of``, ``/tail`` with ``state`` and ``as_of``."""
from __future__ import annotations

import json

import pytest

from ..support.cli import coord
from ..support.snapshots import AIRPORTS, SEEN, pull_airports, snapshot
from .conftest import Served, init_workspace, serving

STATE_QUERY = f'SELECT iata, name FROM "{AIRPORTS}@state" ORDER BY iata'


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    home = init_workspace(tmp_path_factory.mktemp("ws"))
    pull_airports(home)
    with serving(home) as s:
        yield s


def test_sql_reads_a_state_as_the_cli_does(served):
    answer = served.get("/api/sql", params={"q": STATE_QUERY}).json()
    cli = json.loads(coord("sql", "-o", "json", "-c", STATE_QUERY, cwd=served.home).stdout)
    assert answer["rows"] == cli == snapshot("2020-04-01")


def test_sql_reads_a_state_as_of_an_event_time(served):
    for as_of, day in (("2020-02-15T00:00:00Z", "2020-02-01"), ("2020-03-15T00:00:00Z", "2020-03-01")):
        answer = served.get("/api/sql", params={"q": STATE_QUERY, "as_of": as_of}).json()
        assert answer["rows"] == snapshot(day)


def test_tail_of_the_state_is_what_the_cli_shows(served):
    api = served.get(f"/api/datasets/{AIRPORTS}/tail", params={"state": "true", "n": 2,
                                                              "as_of": "2020-03-15T00:00:00Z"}).json()
    cli = coord("tail", AIRPORTS, "--state", "-n", "2", "--as-of", "2020-03-15T00:00:00Z", "-o", "json",
                cwd=served.home).stdout
    assert api["records"] == json.loads(cli)
    assert [r["iata"] for r in api["records"]] == ["DDD", "BBB"]  # DDD's and BBB's versions came last


def test_as_of_without_state_is_a_400(served):
    r = served.get(f"/api/datasets/{AIRPORTS}/tail", params={"as_of": "2020-01-01T00:00:00Z"})
    assert r.status_code == 400 and "give state=true" in r.json()["error"]


def test_the_state_of_a_dataset_without_a_primary_key_is_a_400_saying_why(served):
    sql = served.get("/api/sql", params={"q": f'SELECT * FROM "{SEEN}@state"'})
    tail = served.get(f"/api/datasets/{SEEN}/tail", params={"state": "true"})
    for r in (sql, tail):
        assert r.status_code == 400, r.text
        assert r.json()["error"].startswith(f"dataset {SEEN} has no state: its merge strategy is append")
