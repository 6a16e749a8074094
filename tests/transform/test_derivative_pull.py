"""Derivative datasets through the real coord command and the real sandboxed Spark engine."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from coordinator.workspace import Workspace

from ..support.cli import coord
from .pipeline import (
    HOURLY,
    LARGE,
    ORDERS,
    expected_hourly,
    manifest,
    order_rows,
    root_source,
    write_manifests,
    write_orders_file,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def home(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    return tmp_path


def records(home, dataset_id: str) -> list[dict]:
    ds = Workspace.open(home).dataset(dataset_id)
    files = ds.data_files()
    if not files:
        return []
    table = pa.concat_tables([pq.read_table(f) for f in files]).drop_columns(["system_time"])
    return sorted(table.to_pylist(), key=lambda r: (r["event_time"], r.get("customer", "")))


def blocks(home, dataset_id: str) -> list[dict]:
    return json.loads(coord("log", dataset_id, "-o", "json", cwd=home).stdout)


def test_pull_recursive_brings_the_chain_up_to_date_with_one_engine(home):
    rows = order_rows(6)
    write_orders_file(home, "2024-01-01.csv", rows)
    coord("add", str(write_manifests(home)), cwd=home)
    out = coord("pull", "-r", HOURLY, LARGE, cwd=home).stdout
    assert f"{ORDERS}: 24 new records" in out
    assert records(home, LARGE) == sorted(
        ({"event_time": t, "order_id": i, "customer": c, "amount": a} for t, i, c, a in rows if a > 10),
        key=lambda r: (r["event_time"], r["customer"]),
    )
    assert records(home, HOURLY) == expected_hourly(rows, watermark=rows[-1][0])
    engines = {json.dumps(b["engine"], sort_keys=True) for d in (HOURLY, LARGE) for b in blocks(home, d)
               if "engine" in b}
    assert len(engines) == 1, "one engine served the whole command"
    engine = json.loads(engines.pop())
    assert engine["runtime"] == "sandbox" and engine["networkIsolated"] is True

    again = coord("pull", "-r", HOURLY, cwd=home).stdout
    assert f"{HOURLY}: up to date" in again


def test_data_arriving_over_several_pulls_gives_the_one_pull_result(home):
    rows = order_rows(8)
    coord("add", str(write_manifests(home)), cwd=home)
    for part, chunk in enumerate((rows[:9], rows[9:10], rows[10:25], rows[25:])):
        write_orders_file(home, f"2024-01-01-{part}.csv", chunk)
        coord("pull", "-r", HOURLY, cwd=home)
    assert records(home, HOURLY) == expected_hourly(rows, watermark=rows[-1][0])
    executed = [b for b in blocks(home, HOURLY) if "inputSlices" in b]
    assert len(executed) == 4
    assert sum(b["inputSlices"][0]["numRecords"] for b in executed) == len(rows)


def test_an_explicit_watermark_closes_windows_without_new_data(home):
    rows = order_rows(3)
    write_orders_file(home, "2024-01-01.csv", rows)
    coord("add", str(write_manifests(home)), cwd=home)
    coord("pull", "-r", HOURLY, cwd=home)
    before = records(home, HOURLY)
    coord("pull", ORDERS, "--set-watermark", "2024-01-02T00:00:00Z", cwd=home)
    coord("pull", HOURLY, cwd=home)
    after = records(home, HOURLY)
    assert len(after) > len(before)
    assert after == expected_hourly(rows, watermark=rows[-1][0].replace(hour=23))
    assert blocks(home, HOURLY)[0]["outputWatermark"] == "2024-01-02T00:00:00Z"


def test_a_nanosecond_explicit_watermark_reaches_the_engine_which_keeps_microseconds(home):
    rows = order_rows(3)
    write_orders_file(home, "2024-01-01.csv", rows)
    coord("add", str(write_manifests(home)), cwd=home)
    coord("pull", ORDERS, cwd=home)
    coord("pull", ORDERS, "--set-watermark", "2024-01-02T00:00:00.000000999Z", cwd=home)
    assert blocks(home, ORDERS)[0]["outputWatermark"] == "2024-01-02T00:00:00.000000999Z"
    coord("pull", HOURLY, cwd=home)
    assert records(home, HOURLY) == expected_hourly(rows, watermark=rows[-1][0].replace(hour=23))
    # Spark's times are microseconds: the engine floors the watermark it was sent
    assert blocks(home, HOURLY)[0]["outputWatermark"] == "2024-01-02T00:00:00Z"
    coord("verify", HOURLY, cwd=home)


def test_a_coordinator_killed_after_the_engine_answered_redoes_the_step_exactly_once(home):
    rows = order_rows(6)
    write_orders_file(home, "2024-01-01.csv", rows)
    coord("add", str(write_manifests(home)), cwd=home)
    coord("pull", ORDERS, cwd=home)
    crash = {"COORD_CRASH_AT": "engine-answered"}
    killed = coord("pull", HOURLY, cwd=home, env=crash, check=False)
    assert killed.returncode == -9
    assert not any("inputSlices" in b for b in blocks(home, HOURLY))
    coord("pull", HOURLY, cwd=home)
    executed = [b for b in blocks(home, HOURLY) if "inputSlices" in b]
    assert len(executed) == 1
    assert records(home, HOURLY) == expected_hourly(rows, watermark=rows[-1][0])


def test_an_invalid_query_shows_sparks_message_and_commits_nothing(home):
    rows = order_rows(2)
    write_orders_file(home, "2024-01-01.csv", rows)
    bad = "SELECT event_time, nope FROM `com.example.orders`"
    coord("add", str(write_manifests(home, large_sql=bad)), cwd=home)
    proc = coord("pull", "-r", LARGE, cwd=home, check=False)
    assert proc.returncode == 1
    assert "nope" in proc.stderr and "line 1" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(blocks(home, LARGE)) == 1


def test_a_query_the_policy_refuses_is_one_line_and_commits_nothing(home):
    rows = order_rows(2)
    write_orders_file(home, "2024-01-01.csv", rows)
    random = "SELECT event_time, order_id, rand() AS luck FROM `com.example.orders`"
    coord("add", str(write_manifests(home, large_sql=random)), cwd=home)
    proc = coord("pull", "-r", LARGE, cwd=home, check=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "FORBIDDEN" in lines[0] and "step 0 (the output): function rand() is not allowed" in lines[0]
    assert len(blocks(home, LARGE)) == 1


def test_changing_a_query_may_add_columns_but_not_drop_them(home):
    rows = order_rows(2)
    write_orders_file(home, "2024-01-01.csv", rows)
    coord("add", str(write_manifests(home)), cwd=home)
    coord("pull", "-r", LARGE, cwd=home)
    added = f"SELECT event_time, order_id, customer, amount, amount * 2 AS doubled FROM `{ORDERS}`"
    out = coord("add", "--replace", str(write_manifests(home, large_sql=added)), cwd=home).stdout
    assert f"updated   {LARGE}" in out
    dropped = f"SELECT event_time, order_id, amount FROM `{ORDERS}`"
    proc = coord("add", "--replace", str(write_manifests(home, large_sql=dropped)), cwd=home,
                 check=False)
    assert proc.returncode == 1 and "drops column 'customer'" in proc.stderr

    write_orders_file(home, "2024-01-02.csv", order_rows(4)[8:])
    coord("pull", "-r", LARGE, cwd=home)
    newest = pq.read_table(Workspace.open(home).dataset(LARGE).data_files()[-1])
    assert "doubled" in newest.column_names


def test_root_preprocess_runs_in_the_engine(home):


    write_orders_file(home, "2024-01-01.csv", order_rows(1))
    doc = manifest(ORDERS, root_source(preprocess="SELECT event_time, order_id, upper(customer) AS customer, "
                                                 "amount FROM input"))
    (home / "orders.yaml").write_text(yaml.safe_dump(doc))
    coord("add", str(home / "orders.yaml"), cwd=home)
    coord("pull", ORDERS, cwd=home)
    assert {r["customer"] for r in records(home, ORDERS)} == {"ANN", "BOB", "CID"}
