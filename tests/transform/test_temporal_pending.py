"""The events of a temporal join that wait for the temporal table's watermark are never held
without saying so: in a default (current ODF) workspace the engine counts them after each step
and ``coord pull``, ``coord status`` (and ``-o json``) and ``coord list`` name how many rows of
which input wait for which table's watermark, until they are released. The pipeline and the
hand-computed answer are test_temporal_pull's."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from ..support.cli import coord
from .test_temporal_pull import AIRPORTS, DAY, ENRICHED, HOURS, TEMPS, add_pipeline, write_day

pytestmark = pytest.mark.spark
# The first day's airports file dates the airports' watermark at its day: the temperatures of
# the first two days after that instant wait for a later one.
WAITING = sum(1 for t, _ in HOURS if DAY < t < DAY + timedelta(days=2))
WORDS = (f"{WAITING} rows of {TEMPS} wait for {AIRPORTS}' watermark to reach their event time "
         f"(it is {DAY:%Y-%m-%dT%H:%M:%SZ})")


@pytest.fixture(scope="module")
def pulled(tmp_path_factory):
    """The pipeline after its first pull, and what that pull said."""
    home = tmp_path_factory.mktemp("pending")
    add_pipeline(home, odf="0.39")
    write_day(home, 0)
    return home, coord("pull", "-r", ENRICHED, cwd=home).stdout


def test_pull_says_how_many_rows_wait_and_for_what(pulled):
    _, said = pulled
    [line] = [x for x in said.splitlines() if x.startswith(f"{ENRICHED}:")]
    assert line == f"{ENRICHED}: 3 new records; {WORDS}"


def test_status_is_not_up_to_date_while_rows_wait(pulled):
    home, _ = pulled
    [row] = [x for x in coord("status", ENRICHED, cwd=home).stdout.splitlines() if x.startswith(ENRICHED)]
    assert WORDS in row and "up to date" not in row


def test_status_json_names_the_rows_and_the_watermark(pulled):
    home, _ = pulled
    [entry] = json.loads(coord("status", ENRICHED, "-o", "json", cwd=home).stdout)
    assert not entry["upToDate"] and entry["reasons"] == ["rowsWaiting"]
    assert entry["pendingRows"] == [{"input": TEMPS, "rows": WAITING, "waitingFor": [AIRPORTS],
                                     "watermark": f"{DAY:%Y-%m-%dT%H:%M:%SZ}"}]


def test_list_shows_rows_waiting(pulled):
    home, _ = pulled
    [row] = [x for x in coord("list", cwd=home).stdout.splitlines() if x.startswith(ENRICHED)]
    assert row.endswith("rows waiting")


def test_released_rows_leave_it_up_to_date(tmp_path):
    add_pipeline(tmp_path, odf="0.39")
    write_day(tmp_path, 0)
    coord("pull", "-r", ENRICHED, cwd=tmp_path)
    coord("pull", AIRPORTS, "--set-watermark", (DAY + timedelta(days=30)).isoformat(), cwd=tmp_path)

    said = coord("pull", ENRICHED, cwd=tmp_path).stdout
    assert said.strip() == f"{ENRICHED}: {WAITING} new records"
    [entry] = json.loads(coord("status", ENRICHED, "-o", "json", cwd=tmp_path).stdout)
    assert entry["upToDate"] and entry["pendingRows"] == []
