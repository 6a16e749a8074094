"""A window downstream of a time-bounded join, in another dataset, drops none of the join's
later rows: a derivative's input watermark is its input's recorded watermark (issue 31).

One workspace through the real coord command and the shared Spark engine. Two roots, orders
and shipments; SHIPPED joins them with a two-hour bound, so its recorded watermark runs two
hours behind its inputs' while its rows reach the latest order shipped; HOURLY counts SHIPPED
per hour of the order. Shipments come out of order of their orders (a slow one ships after a
later fast one), in three deliveries. HOURLY_BEFORE is the same window as a dataset added
before the rule existed (its transform names no rule): it still takes the latest event time
seen as its input's watermark, drops the late orders, and replays as it was recorded.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from coordinator.metadata import objects as o
from coordinator.metadata.timestamps import now_utc
from coordinator.workspace import Workspace

from ..support.cli import coord
from .pipeline import T0, manifest
from .test_chained_pull import root, write_csv
from .test_derivative_pull import blocks, records

pytestmark = pytest.mark.spark

ORDERS, SHIPMENTS = "com.example.orders", "com.example.shipments"
SHIPPED, HOURLY = "com.example.shipped", "com.example.shipped.hourly"
HOURLY_BEFORE = "com.example.shipped.hourly-before"
SHIPPED_SQL = f"""SELECT o.event_time, o.order_id, o.amount, s.event_time AS shipped_at, s.carrier
FROM `{ORDERS}` o JOIN `{SHIPMENTS}` s ON o.order_id = s.order_id
 AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL 2 HOURS"""
HOURLY_SQL = f"""SELECT window.end AS event_time, count(*) AS shipped, sum(amount) AS total
FROM `{SHIPPED}` GROUP BY window(event_time, '1 hour')"""

# An order every half hour from T0, each shipped within the join's two hours; order 3 (01:30)
# ships at 03:05, after order 4 (02:00) shipped at 02:20.
DELAYS = [100, 25, 70, 95, 20, 60, 45, 110, 30, 85, 50, 65]  # minutes
ORDER_ROWS = [{"event_time": T0 + timedelta(minutes=30 * i), "order_id": i, "amount": i + 1}
              for i in range(len(DELAYS))]
SHIPMENT_ROWS = sorted(
    ({"event_time": r["event_time"] + timedelta(minutes=d), "order_id": r["order_id"],
      "carrier": "ups" if d % 2 else "dhl"} for r, d in zip(ORDER_ROWS, DELAYS, strict=True)),
    key=lambda r: r["event_time"])
CUTS = [T0 + timedelta(hours=3), T0 + timedelta(hours=5)]  # shipments delivered up to each cut
# What the old rule drops: order 3's hour closed when order 4's row came (step 1), order 7's
# when order 8's came (step 2).
LATE_ORDERS = (3, 7)
FAR_WATERMARK = T0 + timedelta(days=30)


def shipments_until(cut: datetime | None, after: datetime | None = None) -> list[dict]:
    return [r for r in SHIPMENT_ROWS if (after is None or r["event_time"] > after)
            and (cut is None or r["event_time"] <= cut)]


def add_as_before_the_rule(home, dataset_id: str, inputs: list[str], query: str) -> None:
    """A derivative as `coord add` wrote it before the rule existed: its transform names none."""
    source = o.DatasetSourceDerivative(inputs=inputs, transform=o.TransformSql(engine="spark", query=query))
    with Workspace.open(home).dataset(dataset_id).writer() as w:
        w.commit(o.MetadataBlock(system_time=now_utc(), source=source))


def executed(home, dataset_id: str) -> list[tuple[bytes, o.MetadataBlock]]:
    """The dataset's executed blocks with their hashes, oldest first."""
    chain = reversed(list(Workspace.open(home).dataset(dataset_id).blocks()))
    return [(h, b) for h, b in chain if b.input_slices is not None]


def watermarks(home, dataset_id: str) -> list[datetime | None]:
    return [b.output_watermark for _, b in executed(home, dataset_id)]


def expected_hourly(orders: list[dict], shipments: list[dict], watermark: datetime | None,
                    dropped: tuple[int, ...] = ()) -> list[dict]:
    """DuckDB's batch answer: the join over the rows delivered, counted per hour of the order,
    the windows the watermark has closed; ``dropped``: orders left out."""
    def naive(rows: list[dict]) -> pa.Table:
        return pa.Table.from_pylist([{**r, "event_time": r["event_time"].replace(tzinfo=None)} for r in rows])
    db = duckdb.connect()
    db.register("o_rows", naive([r for r in orders if r["order_id"] not in dropped]))
    db.register("s_rows", naive(shipments))
    closed = watermark.replace(tzinfo=None) if watermark else None
    rows = db.sql("""
        SELECT time_bucket(INTERVAL 1 HOUR, o.event_time) + INTERVAL 1 HOUR AS event_time,
               count(*) AS shipped, sum(o.amount) AS total
        FROM o_rows o JOIN s_rows s ON o.order_id = s.order_id
         AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL 2 HOUR
        GROUP BY 1 ORDER BY 1""").fetchall()
    return [{"event_time": t.replace(tzinfo=T0.tzinfo), "shipped": n, "total": total}
            for t, n, total in rows if closed is not None and t <= closed]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """The pipeline after each of three deliveries; the last closes everything."""
    home = tmp_path_factory.mktemp("input-watermarks")
    coord("init", "--odf", "0.18", cwd=home)
    folder = home / "manifests"
    folder.mkdir()
    append = {"merge": {"kind": "append"}}
    docs = [
        manifest(ORDERS, {**root("orders", ["event_time TIMESTAMP", "order_id BIGINT", "amount BIGINT"], []),
                          **append}),
        manifest(SHIPMENTS, {**root("shipments",
                                    ["event_time TIMESTAMP", "order_id BIGINT", "carrier STRING"], []),
                             **append}),
        manifest(SHIPPED, {"kind": "derivative", "inputs": [ORDERS, SHIPMENTS],
                           "transform": {"kind": "sql", "engine": "spark", "query": SHIPPED_SQL}}),
        manifest(HOURLY, {"kind": "derivative", "inputs": [SHIPPED],
                          "transform": {"kind": "sql", "engine": "spark", "query": HOURLY_SQL}}),
    ]
    for doc in docs:
        (folder / f"{doc['content']['id']}.yaml").write_text(yaml.safe_dump(doc))
    coord("add", str(folder), cwd=home)
    add_as_before_the_rule(home, HOURLY_BEFORE, [SHIPPED], HOURLY_SQL)
    write_csv(home, "orders", "1.csv", ORDER_ROWS)
    write_csv(home, "shipments", "1.csv", shipments_until(CUTS[0]))
    coord("pull", "-r", HOURLY, HOURLY_BEFORE, cwd=home)
    write_csv(home, "shipments", "2.csv", shipments_until(CUTS[1], after=CUTS[0]))
    coord("pull", "-r", HOURLY, HOURLY_BEFORE, cwd=home)
    write_csv(home, "shipments", "3.csv", shipments_until(None, after=CUTS[1]))
    coord("pull", ORDERS, SHIPMENTS, cwd=home)
    for root_id in (ORDERS, SHIPMENTS):
        coord("pull", root_id, "--set-watermark", FAR_WATERMARK.isoformat(), cwd=home)
    coord("pull", "-r", HOURLY, HOURLY_BEFORE, cwd=home)
    return home


@pytest.fixture(scope="module")
def steps(home) -> list[list[dict]]:
    """HOURLY's records as committed by the end of each step (its blocks' slices, in order)."""
    ds = Workspace.open(home).dataset(HOURLY)
    so_far: list[dict] = []
    result = []
    for h, block in executed(home, HOURLY):
        if block.output_slice is not None:
            so_far += pq.read_table(ds.data_file(h)).drop_columns(["system_time"]).to_pylist()
        result.append(sorted(so_far, key=lambda r: r["event_time"]))
    return result


def test_the_join_holds_its_watermark_back_behind_its_rows(home):
    # The shape of the issue: after the first step the window's input lags the rows it holds.
    first_hash, first = executed(home, SHIPPED)[0]
    rows = pq.read_table(Workspace.open(home).dataset(SHIPPED).data_file(first_hash)).to_pylist()
    assert max(r["event_time"] for r in rows) == T0 + timedelta(hours=2)  # order 4's
    assert first.output_watermark is not None and first.output_watermark < T0 + timedelta(hours=1)


def test_a_window_behind_the_join_drops_none_of_its_later_rows(home):
    assert [b.late_rows for _, b in executed(home, HOURLY)] == [None, None, None]


def test_the_windows_input_watermark_is_the_joins_recorded_watermark(home):
    assert watermarks(home, HOURLY) == watermarks(home, SHIPPED)


def test_the_window_matches_duckdb_at_every_step(home, steps):
    delivered = [shipments_until(CUTS[0]), shipments_until(CUTS[1]), SHIPMENT_ROWS]
    for committed, shipments, watermark in zip(steps, delivered, watermarks(home, HOURLY), strict=True):
        assert committed == expected_hourly(ORDER_ROWS, shipments, watermark)
    assert len(steps[-1]) == len({r["event_time"].replace(minute=0) for r in ORDER_ROWS})  # all closed


def test_verify_replays_the_window_and_certifies_it_invariant(home):
    assert "reproducibility: reproduced" in coord("verify", HOURLY, cwd=home).stdout
    report = json.loads(coord("verify", "--invariance", HOURLY, "-o", "json", cwd=home).stdout)
    assert report["verdict"] == "invariant"


def test_a_dataset_added_before_the_rule_still_drops_the_late_orders(home):
    assert [b.late_rows for _, b in executed(home, HOURLY_BEFORE)] == [None, 1, 1]
    assert records(home, HOURLY_BEFORE) == expected_hourly(
        ORDER_ROWS, SHIPMENT_ROWS, FAR_WATERMARK, dropped=LATE_ORDERS)


def test_a_dataset_added_before_the_rule_replays_byte_for_byte(home):
    assert "reproducibility: reproduced" in coord("verify", HOURLY_BEFORE, cwd=home).stdout


def test_its_manifest_added_again_leaves_it_under_its_rule(home):
    doc = manifest(HOURLY_BEFORE, {"kind": "derivative", "inputs": [SHIPPED],
                                   "transform": {"kind": "sql", "engine": "spark", "query": HOURLY_SQL}})
    path = home / "before.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert coord("add", "--replace", str(path), cwd=home).stdout.split()[0] == "unchanged"
    [set_transform] = [b for b in blocks(home, HOURLY_BEFORE) if b.get("source")]
    assert "inputWatermarks" not in set_transform["source"]["transform"]
