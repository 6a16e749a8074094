"""``coord verify --invariance`` across the shapes the Spark engine supports, in one workspace:
two roots (orders and shipments, tests/chained_streams.py) fed in four rounds whose slices
interleave unevenly, every derivative pulled with them, then `--set-watermark` on the roots
and one more pull that closes everything. Each derivative's committed records equal the same
query over all the data in DuckDB, and the check finds them the same computed in one step.
A window that dropped rows as late, and ``first()`` without an order, are not invariant
(two more roots, readings and events, feed those two)."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import yaml

from tests.chained_streams import (
    FAR_WATERMARK,
    ORDER_ROWS,
    ORDERS_ID,
    ORDERS_WITH_SHIPMENTS,
    SHAPES,
    SHIPMENT_ROWS,
    SHIPMENTS_ID,
    Shape,
    batch_rows,
    in_pulls,
)

from ..support import engines
from ..support.cli import coord
from .pipeline import manifest
from .test_chained_pull import root, write_csv
from .test_derivative_pull import records

pytestmark = pytest.mark.spark

READINGS_ID = "com.example.readings"
D0 = datetime(2024, 1, 20, tzinfo=UTC)  # before FAR_WATERMARK, which closes it too

# Each shape is a derivative of the workspace, named by its key.
INVARIANT = {
    "filter": Shape([(None, f"SELECT event_time, order_id, amount FROM `{ORDERS_ID}` WHERE amount > 3")],
                    "SELECT event_time, order_id, amount FROM orders WHERE amount > 3"),
    "union": Shape([(None, f"SELECT event_time, order_id, 'ordered' AS what FROM `{ORDERS_ID}` UNION ALL "
                           f"SELECT event_time, order_id, carrier AS what FROM `{SHIPMENTS_ID}`")],
                   "SELECT event_time, order_id, 'ordered' AS what FROM orders UNION ALL "
                   "SELECT event_time, order_id, carrier AS what FROM shipments"),
    "join": Shape([(None, ORDERS_WITH_SHIPMENTS.format(kind="INNER"))],
                  "SELECT o.event_time, o.order_id, o.amount, s.event_time AS shipped_at, s.carrier "
                  "FROM orders o JOIN shipments s ON o.order_id = s.order_id "
                  "AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL 2 DAYS"),
    # a double column too: its sums are compared within the tolerance
    "window": Shape([(None, "SELECT window.end AS event_time, count(*) AS n, sum(amount) AS amount, "
                            f"sum(amount / 3) AS thirds FROM `{ORDERS_ID}` "
                            "GROUP BY window(event_time, '12 hours')")],
                    "SELECT bucket(event_time, 43200) + INTERVAL 12 HOURS AS event_time, count(*) AS n, "
                    "sum(amount) AS amount, sum(amount / 3) AS thirds FROM orders GROUP BY ALL"),
    **SHAPES,  # a window behind a left join and a filter, a window behind an inner join, two windows
}
# first() without an order: one event at noon, then one at 6:00 the same day (its window still
# open) with a larger delivery. Step by step the day keeps the first delivered; in one step
# Spark reads the larger file first.
EVENTS_ID = "com.example.events"
FIRST = "first"
FIRST_SQL = (f"SELECT window.end AS event_time, first(v) AS first_v FROM `{EVENTS_ID}` "
             "GROUP BY window(event_time, '1 day')")
E0 = datetime(2024, 1, 25, tzinfo=UTC)
EVENTS = [[{"event_time": E0 + timedelta(hours=12), "v": 1}],
          [{"event_time": E0 + timedelta(hours=6), "v": 2}]
          + [{"event_time": E0 + timedelta(days=1, hours=h), "v": 100 + h} for h in range(24)]]
# Readings every hour of three days, then a delivery with late ones for the first two days.
LATE = "late"
LATE_SQL = (f"SELECT window.end AS event_time, count(*) AS n FROM `{READINGS_ID}` "
            "GROUP BY window(event_time, '1 day')")
READINGS = [[{"event_time": D0 + timedelta(hours=h), "reading": h} for h in range(72)],
            [{"event_time": D0 + timedelta(hours=h, minutes=30), "reading": h} for h in (3, 4, 30)]
            + [{"event_time": D0 + timedelta(hours=h), "reading": h} for h in range(72, 96)]]


def derivative(dataset_id: str, inputs: list[str], steps: list[tuple[str | None, str]]) -> dict:
    return manifest(dataset_id, {
        "kind": "derivative", "inputs": inputs,
        "transform": {"kind": "sql", "engine": "spark",
                      "queries": [{"alias": a, "query": q} if a else {"query": q} for a, q in steps]},
    })


@pytest.fixture(scope="module")
def home(tmp_path_factory, shared_engine):
    """Every derivative pulled in four rounds and closed by the roots' watermarks."""
    home = tmp_path_factory.mktemp("invariance")
    env = {engines.ENV: f"attach:{shared_engine}"}
    coord("init", "--odf", "0.18", cwd=home)
    docs = [
        manifest(ORDERS_ID, root("orders", ["event_time TIMESTAMP", "order_id BIGINT", "amount BIGINT"],
                                 ["order_id"])),
        manifest(SHIPMENTS_ID, root("shipments",
                                    ["event_time TIMESTAMP", "order_id BIGINT", "carrier STRING"],
                                    ["order_id", "event_time"])),
        manifest(READINGS_ID, {**root("readings", ["event_time TIMESTAMP", "reading BIGINT"], []),
                               "merge": {"kind": "append"}}),
        *(derivative(name, [ORDERS_ID, SHIPMENTS_ID] if "join" in name or name == "union" else [ORDERS_ID],
                     shape.steps) for name, shape in INVARIANT.items()),
        manifest(EVENTS_ID, {**root("events", ["event_time TIMESTAMP", "v BIGINT"], []),
                             "merge": {"kind": "append"}}),
        derivative(FIRST, [EVENTS_ID], [(None, FIRST_SQL)]),
        derivative(LATE, [READINGS_ID], [(None, LATE_SQL)]),
    ]
    (home / "manifests").mkdir()
    for doc in docs:
        (home / "manifests" / f"{doc['content']['id']}.yaml").write_text(yaml.safe_dump(doc))
    coord("add", str(home / "manifests"), cwd=home)

    orders, shipments = in_pulls(ORDER_ROWS, 4), in_pulls(SHIPMENT_ROWS, 4)
    # Uneven rounds: the orders run ahead of the shipments, then fall behind.
    rounds = [([orders[0], orders[1]], [shipments[0]], READINGS[0], EVENTS[0]),
              ([orders[2]], [shipments[1], shipments[2]], READINGS[1], EVENTS[1]),
              ([orders[3]], [shipments[3]], [], [])]
    roots = (ORDERS_ID, SHIPMENTS_ID, READINGS_ID, EVENTS_ID)
    for k, (order_parts, shipment_parts, readings, events) in enumerate(rounds):
        for j, part in enumerate(order_parts):
            write_csv(home, "orders", f"{k}-{j}.csv", part)
        for j, part in enumerate(shipment_parts):
            write_csv(home, "shipments", f"{k}-{j}.csv", part)
        if readings:
            write_csv(home, "readings", f"{k}.csv", readings)
        if events:
            write_csv(home, "events", f"{k}.csv", events)
        if k == len(rounds) - 1:  # the last data and the watermarks that close it, in one step
            coord("pull", *roots, cwd=home, env=env)
            for root_id in roots:
                coord("pull", root_id, "--set-watermark", FAR_WATERMARK.isoformat(), cwd=home, env=env)
        coord("pull", "--all", cwd=home, env=env)
    return home


def invariance(home, dataset_id: str, check: bool = True):
    return coord("verify", "--invariance", dataset_id, "-o", "json", cwd=home, check=check)


def canon(rows: list[dict]) -> list[tuple]:
    """Rows in one order, whole numbers as ints and doubles to 6 places (Spark's and DuckDB's
    sums of doubles may differ in their last bits)."""
    def value(v):
        return round(v, 6) if isinstance(v, float) else int(v) if isinstance(v, int | Decimal) else v
    return sorted((tuple(value(v) for v in r.values()) for r in rows), key=lambda r: tuple(map(str, r)))


@pytest.mark.parametrize("name", INVARIANT)
def test_a_shape_pulled_in_several_steps_is_the_same_computed_in_one(home, name):
    expected = batch_rows(INVARIANT[name])
    assert canon(records(home, name)) == canon(expected)
    report = json.loads(invariance(home, name).stdout)
    assert report["verdict"] == "invariant"
    assert report["records"] == {"committed": len(expected), "oneStep": len(expected)}
    assert report["steps"] >= 3
    watermark = report["outputWatermark"]
    assert watermark["committed"] == watermark["oneStep"] is not None


def test_a_window_that_dropped_late_rows_is_not_invariant(home):
    # The second delivery's rows of the first two days came after the first delivery had
    # closed those days (watermark: day 3, 23:00): dropped step by step, counted in one step.
    report = json.loads(invariance(home, LATE, check=False).stdout)
    day = [D0 + timedelta(days=k) for k in range(1, 5)]
    assert report["verdict"] == "not invariant"
    assert report["onlyCommitted"] == {"count": 2, "first": [
        {"event_time": day[0].strftime("%Y-%m-%dT%H:%M:%SZ"), "n": 24},
        {"event_time": day[1].strftime("%Y-%m-%dT%H:%M:%SZ"), "n": 24}]}
    assert report["onlyOneStep"] == {"count": 2, "first": [
        {"event_time": day[0].strftime("%Y-%m-%dT%H:%M:%SZ"), "n": 26},
        {"event_time": day[1].strftime("%Y-%m-%dT%H:%M:%SZ"), "n": 25}]}
    assert report["records"] == {"committed": 4, "oneStep": 4}


def test_first_without_an_order_is_reported_not_certified(home):
    proc = invariance(home, FIRST, check=False)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["verdict"] == "not invariant"
    day = (E0 + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert report["onlyCommitted"] == {"count": 1, "first": [{"event_time": day, "first_v": 1}]}
    assert report["onlyOneStep"] == {"count": 1, "first": [{"event_time": day, "first_v": 2}]}
