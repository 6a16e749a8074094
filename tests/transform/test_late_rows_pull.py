"""Rows a derivative's window drops as late are never silent, and a plain join with a change
log is flagged (issue 31, items 3 and 4).

One workspace through the real coord command and the shared Spark engine: an orders root (a
ledger keyed on order_id) and two hourly windows over it, one that drops late rows and reports
them (the default) and one that asks to fail instead (``lateRows: fail``). Six hours of orders,
then three stragglers in three hours the windows have already closed. A third derivative joins
the orders with themselves.
"""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
import yaml

from ..support.cli import coord
from .pipeline import ORDERS, T0, derivative_source, manifest, order_rows, root_source, write_orders_file
from .test_derivative_pull import blocks

pytestmark = pytest.mark.spark

HOURLY = "com.example.orders.hourly"
STRICT = "com.example.orders.hourly-strict"
HOURLY_COUNT = """SELECT window.end AS event_time, count(*) AS orders FROM `com.example.orders`
GROUP BY window(event_time, '1 hour')"""
STRAGGLERS = [(T0 + timedelta(hours=h, minutes=5), 1000 + h, "dan", 1.0) for h in (1, 2, 3)]
REORDERS = "com.example.orders.reorders"
REORDERS_SQL = """SELECT a.event_time, a.order_id, b.amount
FROM `com.example.orders` a JOIN `com.example.orders` b ON a.customer = b.customer
 AND b.event_time BETWEEN a.event_time AND a.event_time + INTERVAL 1 HOUR"""
DROPPED = f"3 rows of {ORDERS} arrived behind the watermark of {HOURLY} and were dropped"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """The workspace after six hours of orders were pulled through both windows."""
    home = tmp_path_factory.mktemp("late-rows")
    coord("init", "--odf", "0.18", cwd=home)
    strict = derivative_source(HOURLY_COUNT)
    strict["transform"]["lateRows"] = "fail"
    folder = home / "manifests"
    folder.mkdir()
    for dataset_id, source in {ORDERS: root_source(), HOURLY: derivative_source(HOURLY_COUNT),
                               STRICT: strict, REORDERS: derivative_source(REORDERS_SQL)}.items():
        (folder / f"{dataset_id}.yaml").write_text(yaml.safe_dump(manifest(dataset_id, source)))
    coord("add", str(folder), cwd=home)
    write_orders_file(home, "1.csv", order_rows(6))
    coord("pull", "-r", HOURLY, STRICT, cwd=home)
    return home


@pytest.fixture(scope="module")
def stragglers_pull(home) -> str:
    """What `coord pull` printed for the pull that took the stragglers."""
    write_orders_file(home, "2.csv", STRAGGLERS)
    return coord("pull", "-r", HOURLY, cwd=home).stdout


def test_pull_says_how_many_rows_of_which_input_were_dropped_as_late(stragglers_pull):
    assert f"{HOURLY}: 0 new records; {DROPPED}" in stragglers_pull


def test_the_count_is_recorded_with_the_block_and_shown_by_log_builds(home, stragglers_pull):
    assert blocks(home, HOURLY)[0]["lateRows"] == 3
    builds = coord("log", HOURLY, "--builds", cwd=home).stdout.splitlines()
    assert "+0 records, 3 dropped as late" in builds[0]
    as_json = json.loads(coord("log", HOURLY, "--builds", "-o", "json", cwd=home).stdout)
    assert [b["lateRows"] for b in as_json] == [3, 0]


def test_status_shows_the_rows_dropped_as_late(home, stragglers_pull):
    status = json.loads(coord("status", HOURLY, "-o", "json", cwd=home).stdout)[0]
    assert status["lateRows"] == 3
    assert "3 rows dropped as late so far" in status["words"]


def test_a_dataset_asking_to_fail_on_late_rows_fails_in_one_line_and_commits_nothing(home, stragglers_pull):
    before = blocks(home, STRICT)
    failed = coord("pull", STRICT, cwd=home, check=False)
    assert failed.returncode == 1
    assert failed.stderr.strip() == (
        f"coord: error: {STRICT}: 3 rows of {ORDERS} arrived behind the watermark of {STRICT} and "
        "were dropped; its transform says lateRows: fail, so nothing was committed")
    assert blocks(home, STRICT) == before


def test_a_plain_join_with_a_keyed_ledger_is_flagged_by_pull_and_still_committed(home, stragglers_pull):
    pulled = coord("pull", REORDERS, cwd=home)
    assert pulled.stderr.strip() == (
        f"coord: warning: {REORDERS}: {ORDERS} is a ledger root keyed on order_id: every version of a key "
        "is a record; a plain join with it matches every version of a row, not the one in force at each "
        "event's time: list it under temporalTables (with its primaryKey) to join each event with its "
        "state as of the event time")
    assert "new records" in pulled.stdout
