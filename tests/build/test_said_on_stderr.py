"""What a pull or an ingest does that its readers may not follow is said in one line on stderr,
the command still succeeding: records dated behind the root's watermark (``coord ingest``, a
root's pull), and a ``coord pull --set-watermark`` that a reader's other input holds back."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import coord_here
from tests.support.manifests import csv_root_manifest, derivative_manifest, with_event_time
from tests.support.push import LEADERBOARD
from tests.support.push import PLAYER_SCORES as SCORES

ORDERS, REFUNDS, BOTH = "orders", "refunds", "orders.and.refunds"
SCHEMA = ["ts TIMESTAMP", "amount BIGINT"]


def coord(home: Path, *args: str):
    return coord_here(*args, cwd=home, fake_engine=True)


def warnings(said) -> list[str]:
    return [line for line in said.stderr.splitlines() if line.startswith("coord: warning:")]


@pytest.fixture
def pushed(tmp_path) -> Path:
    """The leaderboard's scores pushed up to 2000-01-02, their watermark."""
    coord(tmp_path, "init", "--odf", "0.39", ".")
    coord(tmp_path, "add", str(LEADERBOARD / "player-scores.yaml"))
    for k in (1, 2):
        coord(tmp_path, "ingest", SCORES, str(LEADERBOARD / "data" / f"{k}.ndjson"))
    return tmp_path


def test_an_ingest_dated_behind_the_watermark_says_so(pushed):
    (pushed / "late.ndjson").write_text(
        '{"match_time": "1999-01-01", "match_id": 9, "player_id": "Zed", "score": 99}\n')
    said = coord(pushed, "ingest", SCORES, "late.ndjson")
    assert said.stdout.strip() == f"{SCORES}: 1 new record"
    assert warnings(said) == [
        f"coord: warning: {SCORES}: 1 record of {SCORES} was dated behind its watermark "
        "2000-01-02T00:00:00Z (the oldest 1999-01-01T00:00:00Z); readers that already passed "
        "that time may leave them out (see coord status)"]


def test_an_ingest_on_time_says_nothing_more(pushed):
    said = coord(pushed, "ingest", SCORES, str(LEADERBOARD / "data" / "3.ndjson"))
    assert said.stdout.strip() == f"{SCORES}: 2 new records" and said.stderr == ""


@pytest.fixture
def two_roots(tmp_path) -> Path:
    """Two roots read by one derivative, both pulled up to 2026-01-02."""
    coord(tmp_path, "init", "--odf", "0.39", ".")
    for name in (ORDERS, REFUNDS):
        (tmp_path / name).mkdir()
        (tmp_path / name / "1.csv").write_text("ts,amount\n2026-01-01T00:00:00Z,1\n2026-01-02T00:00:00Z,2\n")
        (tmp_path / f"{name}.yaml").write_text(csv_root_manifest(name, str(tmp_path / name), schema=SCHEMA))
    query = f"SELECT ts, amount FROM `{ORDERS}` UNION ALL SELECT ts, amount FROM `{REFUNDS}`"
    both = with_event_time(derivative_manifest(BOTH, [ORDERS, REFUNDS], query), "ts")
    (tmp_path / f"{BOTH}.yaml").write_text(both)
    coord(tmp_path, "add", f"{ORDERS}.yaml", f"{REFUNDS}.yaml", f"{BOTH}.yaml")
    coord(tmp_path, "pull", "-r", BOTH)
    return tmp_path


def test_a_root_pull_of_records_behind_the_watermark_says_so(two_roots):
    (two_roots / ORDERS / "2.csv").write_text("ts,amount\n2025-12-01T00:00:00Z,3\n")
    said = coord(two_roots, "pull", ORDERS)
    assert said.stdout.strip() == f"{ORDERS}: 1 new record"
    [line] = warnings(said)
    assert line.startswith(f"coord: warning: {ORDERS}: 1 record of {ORDERS} was dated behind its "
                           "watermark 2026-01-02T00:00:00Z (the oldest 2025-12-01T00:00:00Z)")


def test_set_watermark_held_back_by_another_input_says_so(two_roots):
    said = coord(two_roots, "pull", ORDERS, "--set-watermark", "2026-02-01T00:00:00Z")
    assert said.stdout.strip() == f"{ORDERS}: watermark set to 2026-02-01T00:00:00Z"
    assert warnings(said) == [
        f"coord: warning: {ORDERS}: the watermark of {BOTH} will not follow it to "
        f"2026-02-01T00:00:00Z: {REFUNDS}'s is 2026-01-02T00:00:00Z"]


def test_set_watermark_of_every_input_says_nothing_more(two_roots):
    said = coord(two_roots, "pull", ORDERS, REFUNDS, "--set-watermark", "2026-02-01T00:00:00Z")
    assert said.stderr == ""
