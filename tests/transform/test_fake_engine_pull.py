"""A derivative pulled through the real ``coord`` command, with the DuckDB test engine in
place of Spark (tests/support/fake_engine.py): add → pull → more data → pull → verify, every answer
computed again from the CSV files with pandas."""
from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.tamper import flip_a_byte
from .pipeline import HOURLY, LARGE, ORDERS, order_rows, write_manifests, write_orders_file
from .test_verify_replay import forge_with_query


@pytest.fixture
def home(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    coord("add", str(write_manifests(tmp_path)), cwd=tmp_path)
    return tmp_path


def pull(home, *args: str, check: bool = True):
    return coord("pull", *args, cwd=home, check=check, fake_engine=True)


def output(home, dataset_id: str) -> pd.DataFrame:
    files = Workspace.open(home).dataset(dataset_id).data_files()
    table = pa.concat_tables([pq.read_table(f) for f in files]).drop_columns(["system_time"])
    return table.to_pandas().sort_values("order_id", ignore_index=True)


def expected_large(home) -> pd.DataFrame:
    """LARGE's query (amount > 10) over every CSV file, in pandas."""
    files = sorted((home / "orders").glob("*.csv"))
    orders = pd.concat([pd.read_csv(f, parse_dates=["event_time"]) for f in files])
    large = orders[orders.amount > 10].sort_values("order_id", ignore_index=True)
    return large.astype({"event_time": "datetime64[us, UTC]"})


def test_pull_of_a_derivative_over_two_batches_of_input(home):
    rows = order_rows(6)
    write_orders_file(home, "1.csv", rows[:10])
    out = pull(home, "-r", LARGE).stdout
    assert f"{ORDERS}: 10 new records" in out
    assert f"{LARGE}: {sum(a > 10 for *_, a in rows[:10])} new records" in out

    write_orders_file(home, "2.csv", rows[10:])
    pull(home, "-r", LARGE)
    pd.testing.assert_frame_equal(output(home, LARGE), expected_large(home))

    blocks = json.loads(coord("log", LARGE, "-o", "json", cwd=home).stdout)
    executed = [b for b in blocks if "inputSlices" in b]
    assert [b["inputSlices"][0]["numRecords"] for b in reversed(executed)] == [10, len(rows) - 10]
    assert executed[0]["outputWatermark"] == rows[-1][0].strftime("%Y-%m-%dT%H:%M:%SZ")
    assert executed[0]["engine"]["runtime"] == "fake"
    assert f"{LARGE}: up to date" in pull(home, "-r", LARGE).stdout


def test_verify_replays_the_derivative_and_it_reproduces(home):
    rows = order_rows(3)
    for part, chunk in enumerate((rows[:5], rows[5:])):
        write_orders_file(home, f"{part}.csv", chunk)
        pull(home, "-r", LARGE)
    out = coord("verify", LARGE, cwd=home, fake_engine=True).stdout
    assert "reproducibility: reproduced" in out


def test_a_block_that_does_not_reproduce_fails_reproducibility_not_integrity(home):
    write_orders_file(home, "1.csv", order_rows(2))
    pull(home, "-r", LARGE)
    forged = "com.example.forged"
    forge_with_query(Workspace.open(home), LARGE, forged,
                     f"SELECT event_time, order_id, customer, amount FROM `{ORDERS}` WHERE amount > 20")
    proc = coord("verify", forged, cwd=home, fake_engine=True, check=False)
    assert proc.returncode == 1 and "first bad block" in proc.stderr
    integrity, rest = proc.stdout.split("  integrity: ")[1].split("\n", 1)
    assert integrity == "ok" and "FAILED" not in proc.stdout.split("  authorship: ")[0]
    reproducibility = rest.split("  reproducibility: ")[1]
    assert reproducibility.startswith("1 block(s) did not reproduce\n    problem: block ")
    assert "DIFF " in proc.stdout and "BAD " not in proc.stdout


def test_a_stateful_query_is_refused_in_one_line_and_nothing_is_committed(home):
    write_orders_file(home, "1.csv", order_rows(2))
    head = Workspace.open(home).dataset(HOURLY).head()
    proc = pull(home, "-r", HOURLY, check=False)
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"coord: error: {HOURLY}: UNSUPPORTED:") and "Spark engine" in line
    assert Workspace.open(home).dataset(HOURLY).head() == head


def test_a_changed_input_slice_is_refused_and_nothing_is_committed(home):
    rows = order_rows(2)
    write_orders_file(home, "1.csv", rows)
    pull(home, ORDERS)
    [path] = Workspace.open(home).dataset(ORDERS).data_files()
    flip_a_byte(path)
    proc = pull(home, LARGE, check=False)
    assert proc.returncode == 1
    assert f"dataset {ORDERS}: refusing to read {path}: physical hash differs" in proc.stderr
    assert f"run coord verify {ORDERS}" in proc.stderr
    assert Workspace.open(home).dataset(LARGE).data_files() == []


def test_verify_reports_a_step_whose_input_slice_changed_as_not_replayed(home):
    write_orders_file(home, "1.csv", order_rows(2))
    pull(home, "-r", LARGE)
    [path] = Workspace.open(home).dataset(ORDERS).data_files()
    flip_a_byte(path)
    proc = coord("verify", LARGE, cwd=home, fake_engine=True, check=False)
    assert proc.returncode == 1
    assert f"not replayed: dataset {ORDERS}: refusing to read {path}" in proc.stdout
