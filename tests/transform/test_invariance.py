"""``coord verify --invariance``: the command's words, JSON, refusals and scratch isolation,
with the DuckDB test engine (tests/support/fake_engine.py); every expected count is computed
again from the CSV files with pandas. The shapes that need Spark: test_invariance_spark.py."""
from __future__ import annotations

import hashlib
import json
import shutil

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.transform.invariance import compare_records
from coordinator.workspace import Workspace

from ..support.cli import coord
from .pipeline import LARGE, ORDERS, order_rows, write_manifests, write_orders_file
from .test_verify_replay import forge_with_query

FORGED = "com.example.forged"


@pytest.fixture(scope="module")
def pulled(tmp_path_factory):
    """LARGE (orders with amount > 10) pulled in three steps, the orders in three files."""
    home = tmp_path_factory.mktemp("pulled")
    coord("init", "--odf", "0.18", cwd=home)
    coord("add", str(write_manifests(home)), cwd=home)
    rows = order_rows(6)
    for k, part in enumerate((rows[:7], rows[7:15], rows[15:])):
        write_orders_file(home, f"{k}.csv", part)
        coord("pull", "-r", LARGE, cwd=home, fake_engine=True)
    return home


@pytest.fixture
def home(pulled, tmp_path):
    """A copy of ``pulled`` for one test."""
    shutil.copytree(pulled, tmp_path, dirs_exist_ok=True)
    return tmp_path


def invariance(home, dataset_id: str, *args: str, check: bool = True):
    return coord("verify", "--invariance", dataset_id, *args, cwd=home, fake_engine=True, check=check)


def orders(home) -> pd.DataFrame:
    return pd.concat([pd.read_csv(f) for f in sorted((home / "orders").glob("*.csv"))])


def tree(home) -> dict[str, str]:
    """Every file of the workspace but the commands' run folders and its instance id (which a
    copied workspace draws anew when it first starts an engine), by path: its SHA3-256."""
    return {str(p.relative_to(home)): hashlib.sha3_256(p.read_bytes()).hexdigest()
            for p in sorted(home.rglob("*"))
            if p.is_file() and ".coord/run" not in str(p) and p.name != "instance.json"}


def test_a_derivative_pulled_in_three_steps_is_the_same_computed_in_one(home):
    large = int((orders(home).amount > 10).sum())
    out = invariance(home, LARGE).stdout
    assert out == (f"{LARGE}: invariant: {large:,} records, the same computed in one step "
                   "(3 steps committed; output watermark 2024-01-01T05:45:00Z)\n")


def test_the_check_writes_nothing_into_the_workspace(home):
    # The copy's files have new inodes: a read records them in the slice cache first.
    coord("sql", "-c", f'SELECT count(*) FROM "{ORDERS}", "{LARGE}"', cwd=home)
    before = tree(home)
    invariance(home, LARGE)
    assert tree(home) == before
    assert not any(p.is_file() for p in (home / ".coord" / "run").rglob("*"))


def test_records_that_differ_are_named_and_the_command_fails(home):
    # The chain says amount > 20, the committed records hold every amount > 10.
    forge_with_query(Workspace.open(home), LARGE, FORGED,
                     f"SELECT event_time, order_id, customer, amount FROM `{ORDERS}` WHERE amount > 20")
    every = orders(home)
    committed, kept = int((every.amount > 10).sum()), int((every.amount > 20).sum())
    extra = every[(every.amount > 10) & (every.amount <= 20)].sort_values(["event_time", "order_id"])
    proc = invariance(home, FORGED, check=False)
    summary = (f"not invariant: {committed - kept} records differ ({committed - kept} only in the "
               f"{committed} committed in 3 steps, 0 only in the {kept} computed in one step)")
    assert proc.returncode == 1
    assert proc.stderr == f"coord: error: {FORGED}: {summary}\n"
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{FORGED}: {summary}"
    first = extra.iloc[0]
    assert lines[1] == (f"  only committed: event_time={first.event_time} order_id={first.order_id} "
                        f"customer={first.customer} amount={first.amount}")
    assert len(lines) == 1 + 5 + 1 and lines[-1] == f"  only committed: ... {committed - kept - 5} more"


def test_the_json_report(home):
    large = int((orders(home).amount > 10).sum())
    report = json.loads(invariance(home, LARGE, "-o", "json").stdout)
    assert report == {
        "id": LARGE, "verdict": "invariant", "steps": 3,
        "records": {"committed": large, "oneStep": large},
        "onlyCommitted": {"count": 0, "first": []}, "onlyOneStep": {"count": 0, "first": []},
        "columnsDiffer": [],
        "outputWatermark": {"committed": "2024-01-01T05:45:00Z", "oneStep": "2024-01-01T05:45:00Z"},
    }


def test_a_root_is_refused_in_one_line(home):
    proc = invariance(home, ORDERS, check=False)
    assert proc.returncode == 1
    assert proc.stderr == (f"coord: error: {ORDERS} is a root dataset: its data comes from outside, "
                           "there is no transform to recompute\n")


def test_a_derivative_never_pulled_has_nothing_to_check(home):
    hourly = "com.example.orders.hourly"
    assert invariance(home, hourly).stdout == f"{hourly}: nothing to check: no step has run yet\n"


def test_a_chain_whose_query_changed_is_refused_in_one_line(home):
    changed = f"SELECT event_time, order_id, customer, amount FROM `{ORDERS}` WHERE amount > 5"
    coord("add", "--replace", str(write_manifests(home, large_sql=changed)), cwd=home, fake_engine=True)
    write_orders_file(home, "3.csv", order_rows(8)[24:])
    coord("pull", "-r", LARGE, cwd=home, fake_engine=True)
    proc = invariance(home, LARGE, check=False)
    assert proc.returncode == 1
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"coord: error: {LARGE}: its query changed at block ")
    assert line.endswith("after steps had run; --invariance recomputes a chain computed by one query")


def test_options_that_do_not_go_with_it_are_refused(home):
    for args in (["-r"], ["--integrity"]):
        proc = invariance(home, LARGE, *args, check=False)
        assert proc.returncode == 2 and "--invariance checks one dataset" in proc.stderr


def slices(tmp_path, name: str, totals: list[float]) -> list:
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table({"system_time": pa.array([0] * len(totals), pa.int64()),
                             "event_time": pa.array(range(len(totals)), pa.int64()),
                             "total": pa.array(totals, pa.float64())}), path)
    return [path]


def test_float_sums_that_differ_in_their_last_bits_are_the_same(tmp_path):
    # 0.1 + 0.2 + 0.3 summed in another order: 0.6000000000000001 against 0.6
    stepwise = slices(tmp_path, "a", [(0.1 + 0.2) + 0.3, 1.0])
    at_once = slices(tmp_path, "b", [0.1 + (0.2 + 0.3), 1.0])
    assert stepwise[0] != at_once[0] and (0.1 + 0.2) + 0.3 != 0.1 + (0.2 + 0.3)
    same = compare_records(stepwise, at_once, "system_time", "event_time")
    assert same.only_committed.count == same.only_one_step.count == 0

    other = compare_records(stepwise, slices(tmp_path, "c", [0.6001, 1.0]), "system_time", "event_time")
    assert other.only_committed.count == other.only_one_step.count == 1
    assert other.only_one_step.first == [{"event_time": 0, "total": 0.6001}]


def test_an_input_reset_under_the_derivative_is_refused_in_one_line(home):
    # The orders go back to their first block and take their later files again: new blocks
    # the derivative's chain never consumed stand where the ones it did consumed were.
    first = [h for h, _ in Workspace.open(home).dataset(ORDERS).blocks()][-2]
    coord("reset", ORDERS, first.hex(), cwd=home)
    coord("pull", ORDERS, cwd=home)
    proc = invariance(home, LARGE, check=False)
    assert proc.returncode == 1
    assert proc.stderr == (f"coord: error: {LARGE}: input {ORDERS} no longer holds the data block "
                           f"{proc.stderr.split('data block ')[1][:12]} consumed; "
                           f"coord verify {LARGE} names the blocks\n")
