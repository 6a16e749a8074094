"""Rows that arrive behind a window's watermark correct a current-ODF derivative's results
(``lateRows: correct``, what ``coord add`` gives a new derivative), or are dropped and counted,
or fail the pull, as its manifest says.

One default (current-ODF) workspace through the real coord command and the shared Spark engine:
an orders root and three hourly windows over it, the same query with the three policies. Six
hours of orders; then three stragglers for hours the windows have closed; then two more hours.
After each pull every derivative's rows (what its change log describes) are checked against
DuckDB over the orders delivered so far.
"""
from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.described_rows import described_rows
from .pipeline import ORDERS, T0, derivative_source, manifest, order_rows, root_source, write_orders_file

pytestmark = pytest.mark.spark

CORRECTED, DROPPING, STRICT = "orders.hourly", "orders.hourly-drop", "orders.hourly-strict"
PER_CUSTOMER = "orders.per-customer"  # an aggregate without a window: Spark cannot stream it
PER_CUSTOMER_SQL = f"""SELECT max(event_time) AS event_time, customer, count(*) AS orders,
sum(amount) AS total FROM `{ORDERS}` GROUP BY customer"""
HOURLY_COUNT = f"""SELECT window.end AS event_time, count(*) AS orders, sum(amount) AS total
FROM `{ORDERS}` GROUP BY window(event_time, '1 hour')"""
DUCKDB_HOURLY = """SELECT time_bucket(INTERVAL 1 HOUR, event_time) + INTERVAL 1 HOUR AS event_time,
count(*) AS orders, sum(amount) AS total FROM orders GROUP BY ALL"""
FIRST = order_rows(6)
STRAGGLERS = [(T0 + timedelta(hours=h, minutes=5), 1000 + h, "dan", 1.0) for h in (1, 2, 3)]
LATER = [(t + timedelta(hours=6), i + 100, c, a) for t, i, c, a in order_rows(2)]


def rows(home: Path, name: str) -> Counter:
    """The hourly rows ``name``'s change log describes."""
    return described_rows(home, name, ("event_time", "orders", "total"))


def hourly(delivered: list[tuple], *, closed_by=None) -> Counter:
    """DuckDB's hourly counts over ``delivered`` (only windows ending by ``closed_by``, if given)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    orders = pa.table({"event_time": pa.array([r[0] for r in delivered], pa.timestamp("us", "UTC")),
                       "amount": [r[3] for r in delivered]})
    con.register("orders", orders)
    got = con.execute(DUCKDB_HOURLY).fetchall()
    return Counter(r for r in got if closed_by is None or r[0] <= closed_by)


def watermark(home: Path, name: str):
    return CurrentDataset(Workspace.open(home), name).state().watermark


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """Six hours of orders pulled through the three windows."""
    home = tmp_path_factory.mktemp("late-rows-correct")
    coord("init", cwd=home)
    dropping, strict = derivative_source(HOURLY_COUNT), derivative_source(HOURLY_COUNT)
    dropping["transform"]["lateRows"] = "drop"
    strict["transform"]["lateRows"] = "fail"
    folder = home / "manifests"
    folder.mkdir()
    for name, source in {ORDERS: root_source(), CORRECTED: derivative_source(HOURLY_COUNT),
                         DROPPING: dropping, STRICT: strict,
                         PER_CUSTOMER: derivative_source(PER_CUSTOMER_SQL)}.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(manifest(name, source)))
    coord("add", str(folder), cwd=home)
    write_orders_file(home, "1.csv", FIRST)
    first = coord("pull", "-r", CORRECTED, DROPPING, STRICT, PER_CUSTOMER, cwd=home).stdout
    (home / "first-pull.txt").write_text(first)
    return home


def per_customer(delivered: list[tuple]) -> Counter:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("orders", pa.Table.from_pylist(
        [{"event_time": t, "customer": c, "amount": a} for t, _, c, a in delivered]))
    return Counter(con.execute("SELECT max(event_time), customer, count(*), sum(amount) FROM orders "
                               "GROUP BY customer").fetchall())





@pytest.fixture(scope="module")
def stragglers(home) -> str:
    """What `coord pull` printed for the pull that took the stragglers."""
    write_orders_file(home, "2.csv", STRAGGLERS)
    return coord("pull", "-r", CORRECTED, DROPPING, PER_CUSTOMER, cwd=home).stdout


@pytest.fixture(scope="module")
def later(home, stragglers) -> str:
    """Two more hours of orders, pulled."""
    write_orders_file(home, "3.csv", LATER)
    return coord("pull", "-r", CORRECTED, DROPPING, PER_CUSTOMER, cwd=home).stdout


def test_before_any_late_row_a_window_appears_once_its_input_watermark_closes_it(home):
    closed = hourly(FIRST, closed_by=watermark(home, ORDERS))
    assert rows(home, CORRECTED) == closed == rows(home, DROPPING)
    assert len(closed) == 5  # the sixth hour is still open


def test_late_rows_correct_the_windows_they_belong_to(home, stragglers):
    assert rows(home, CORRECTED) == hourly(FIRST + STRAGGLERS)
    assert (f"{CORRECTED}: 7 new records; 3 rows of {ORDERS} arrived behind the watermark of "
            f"{CORRECTED} and corrected its results (lateRows: correct)") in stragglers


def test_each_corrected_window_is_written_as_a_correction_from_its_old_counts_to_its_new(home, stragglers):
    ds = CurrentDataset(Workspace.open(home), CORRECTED)
    newest = pq.read_table(ds.data_file(ds.state().slices[-1].slice)).to_pylist()
    pairs = [((a["event_time"] - T0, a["orders"]), (b["event_time"] - T0, b["orders"]))
             for a, b in zip(newest, newest[1:], strict=False) if (a["op"], b["op"]) == (2, 3)]
    hours = [timedelta(hours=h) for h in (2, 3, 4)]  # the windows ending after the stragglers' hours
    assert pairs == [((h, 4), (h, 5)) for h in hours]
    appended = [(r["event_time"] - T0, r["orders"]) for r in newest if r["op"] == 0]
    assert appended == [(timedelta(hours=6), 4)]  # the open hour: a new window, no retraction
    assert len(newest) == 2 * len(pairs) + len(appended)


def test_a_derivative_asking_to_drop_late_rows_drops_and_counts_them(home, stragglers):
    assert rows(home, DROPPING) == hourly(FIRST, closed_by=watermark(home, ORDERS))
    assert (f"{DROPPING}: 0 new records; 3 rows of {ORDERS} arrived behind the watermark of "
            f"{DROPPING} and were dropped") in stragglers


def test_a_derivative_asking_to_fail_on_late_rows_fails_and_commits_nothing(home, stragglers):
    before = CurrentDataset(Workspace.open(home), STRICT).head()
    failed = coord("pull", STRICT, cwd=home, check=False)
    assert failed.returncode == 1
    assert failed.stderr.strip() == (
        f"coord: error: {STRICT}: 3 rows of {ORDERS} arrived behind the watermark of {STRICT} and "
        "were dropped; its transform says lateRows: fail, so nothing was committed")
    assert CurrentDataset(Workspace.open(home), STRICT).head() == before


def test_after_a_correction_every_step_is_the_query_over_all_delivered_rows(home, later):
    assert rows(home, CORRECTED) == hourly(FIRST + STRAGGLERS + LATER)
    steps = [b.block.event for b in CurrentDataset(Workspace.open(home), CORRECTED).state().blocks
             if isinstance(b.block.event, e.ExecuteTransform)]
    assert [s.new_checkpoint is not None for s in steps] == [True, False, False]


def test_the_output_watermark_is_the_inputs_once_recomputed(home, later):
    assert watermark(home, CORRECTED) == watermark(home, ORDERS)


def test_verify_replays_the_streamed_and_the_recomputed_steps(home, later):
    out = coord("verify", CORRECTED, cwd=home).stdout
    assert "reproducibility: reproduced" in out


def test_invariance_holds_for_the_corrected_derivative(home, later):
    assert f"{CORRECTED}: invariant" in coord("verify", CORRECTED, "--invariance", cwd=home).stdout


def test_provenance_of_a_corrected_window_names_the_rows_behind_its_current_value(home, stragglers):
    ds = CurrentDataset(Workspace.open(home), CORRECTED)
    corrected = ds.state().slices[1]  # the stragglers' step
    records = pq.read_table(ds.data_file(corrected.slice)).to_pylist()
    offset = next(corrected.slice.offset_interval.start + k for k, r in enumerate(records)
                  if r["op"] == 3 and r["event_time"] == T0 + timedelta(hours=2))
    answer = coord("provenance", CORRECTED, "--offset", str(offset), "-o", "json", cwd=home).stdout
    [record] = json.loads(answer)["records"]
    assert record["values"]["orders"] == "5"  # JSON: 64-bit integers as text
    [derivation] = record["derivations"]
    made_from = sorted(int(i["values"]["order_id"]) for i in derivation["inputs"])
    assert made_from == sorted(i for t, i, _, _ in FIRST + STRAGGLERS
                               if T0 + timedelta(hours=1) <= t < T0 + timedelta(hours=2))


def test_an_aggregate_spark_cannot_stream_is_computed_over_the_inputs_rows(home, later):
    assert (f"{PER_CUSTOMER}: 3 new records; its query cannot run as a stream (an aggregate without "
            "a window, say)") in (home / "first-pull.txt").read_text()
    got = described_rows(home, PER_CUSTOMER, ("event_time", "customer", "orders", "total"))
    assert got == per_customer(FIRST + STRAGGLERS + LATER)


def test_a_customer_whose_totals_change_is_corrected_and_a_new_one_appended(home, later):
    ds = CurrentDataset(Workspace.open(home), PER_CUSTOMER)
    stragglers = pq.read_table(ds.data_file(ds.state().slices[1].slice)).to_pylist()
    assert [(r["customer"], r["op"]) for r in stragglers] == [("dan", 0)]  # dan's first orders
    newest = pq.read_table(ds.data_file(ds.state().slices[-1].slice)).to_pylist()
    changed = {c for _, _, c, _ in LATER}
    assert sorted((r["customer"], r["op"]) for r in newest) == sorted(
        (c, op) for c in changed for op in (2, 3))


def test_a_query_spark_cannot_stream_may_replace_one_of_a_derivative_that_corrects(home, later):
    # a column more: checked against the inputs as a batch computes it, then pulled
    query = PER_CUSTOMER_SQL.replace("sum(amount) AS total", "sum(amount) AS total, max(amount) AS top")
    (home / "replaced.yaml").write_text(yaml.safe_dump(manifest(PER_CUSTOMER, derivative_source(query))))
    assert coord("add", "--replace", "replaced.yaml", cwd=home).stdout.startswith("updated")
    coord("pull", PER_CUSTOMER, cwd=home)
    got = described_rows(home, PER_CUSTOMER, ("customer", "orders", "top"))
    delivered = FIRST + STRAGGLERS + LATER
    customers = {r[2] for r in delivered}
    assert got == Counter((c, sum(1 for r in delivered if r[2] == c),
                           max(r[3] for r in delivered if r[2] == c)) for c in customers)
