"""Two streams joined and windowed, fed to a derivative in pulls: the data, the multi-step
queries of each plan shape and their batch answers computed by DuckDB (the engine tests and
the coord tests share them)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import duckdb
import pyarrow as pa

from coordinator.metadata.objects import SqlQueryStep, TransformSql

ORDERS_ID, SHIPMENTS_ID = "com.example.orders", "com.example.shipments"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
# An order every 7 h (give or take) for two weeks. Shipped 5 h, 30 h, 47 h or 60 h (too late
# for the 2-day join) after the order; every fifth order never ships, every sixth ships twice.
ORDER_ROWS = [
    {"event_time": T0 + timedelta(hours=7 * i, minutes=13 * (i % 5)), "order_id": i, "amount": i % 7 + 1}
    for i in range(48)
]
SHIPMENT_ROWS = sorted(
    [
        {"event_time": o["event_time"] + timedelta(hours=delay), "order_id": o["order_id"],
         "carrier": f"carrier-{o['order_id'] % 3}"}
        for o in ORDER_ROWS
        if o["order_id"] % 5 != 4
        for delay in ((5, 30, 47, 60)[o["order_id"] % 4], 20)[: 2 if o["order_id"] % 6 == 0 else 1]
    ],
    key=lambda r: r["event_time"],
)
LAST_EVENT = max(r["event_time"] for r in ORDER_ROWS + SHIPMENT_ROWS)
FAR_WATERMARK = LAST_EVENT + timedelta(days=30)

ORDERS_WITH_SHIPMENTS = """
SELECT o.event_time AS event_time, o.order_id, o.amount, s.event_time AS shipped_at, s.carrier
FROM `com.example.orders` AS o
{kind} JOIN `com.example.shipments` AS s
  ON o.order_id = s.order_id
 AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL 2 DAYS
"""
JOIN_LAG = timedelta(days=2, milliseconds=1)


@dataclass
class Shape:
    """A multi-step transform; ``batch_sql`` is the same query for DuckDB over the tables
    ``orders`` and ``shipments``, with ``bucket(t, seconds)`` for a tumbling window's start."""

    steps: list[tuple[str | None, str]]  # (alias, Spark SQL)
    batch_sql: str
    # How far the output's watermark runs behind the inputs': a join keeps each order for 2
    # days (and 1 ms, Spark's bound for BETWEEN) past the watermark, and may still emit it.
    lag: timedelta = timedelta(0)

    def transform(self) -> TransformSql:
        return TransformSql(engine="spark", queries=[SqlQueryStep(alias=a, query=q) for a, q in self.steps])


SHAPES = {
    # The shape of issue 9: left join, then a daily window per order, then a filter.
    "left-join-window-filter": Shape(
        [
            ("joined", ORDERS_WITH_SHIPMENTS.format(kind="LEFT")),
            ("daily", "SELECT window.end AS event_time, order_id, count(*) AS n, "
                      "count(shipped_at) AS shipped, sum(amount) AS amount "
                      "FROM joined GROUP BY window(event_time, '1 day'), order_id"),
            (None, "SELECT * FROM daily WHERE shipped < 2"),
        ],
        """
        WITH joined AS (
          SELECT o.event_time, o.order_id, o.amount, s.event_time AS shipped_at
          FROM orders o LEFT JOIN shipments s ON o.order_id = s.order_id
           AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL 2 DAYS)
        SELECT bucket(event_time, 86400) + INTERVAL 1 DAY AS event_time, order_id, count(*) AS n,
               count(shipped_at) AS shipped, sum(amount) AS amount
        FROM joined GROUP BY ALL HAVING count(shipped_at) < 2
        """,
        JOIN_LAG,
    ),
    # An inner join, then a window over the *shipment* time, per carrier.
    "inner-join-window": Shape(
        [
            ("joined", ORDERS_WITH_SHIPMENTS.format(kind="INNER")),
            (None, "SELECT window.end AS event_time, carrier, count(*) AS n, sum(amount) AS amount "
                   "FROM joined GROUP BY window(shipped_at, '12 hours'), carrier"),
        ],
        """
        SELECT bucket(s.event_time, 43200) + INTERVAL 12 HOURS AS event_time, s.carrier,
               count(*) AS n, sum(o.amount) AS amount
        FROM orders o JOIN shipments s ON o.order_id = s.order_id
         AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL 2 DAYS
        GROUP BY ALL
        """,
        JOIN_LAG,
    ),
    # Two windows in sequence: 6-hour totals, then daily totals of those. The second window
    # goes over window_time(window) (the end less 1 us): a column that keeps the watermark.
    "window-window": Shape(
        [
            ("six_hourly", "SELECT window.end AS event_time, window_time(window) AS last_moment, n, amount "
                           "FROM (SELECT window, count(*) AS n, sum(amount) AS amount "
                           "FROM `com.example.orders` GROUP BY window(event_time, '6 hours'))"),
            (None, "SELECT window.end AS event_time, count(*) AS windows, sum(n) AS n, sum(amount) AS amount "
                   "FROM six_hourly GROUP BY window(last_moment, '1 day')"),
        ],
        """
        WITH six_hourly AS (
          SELECT bucket(event_time, 21600) + INTERVAL 6 HOURS - INTERVAL 1 MICROSECOND AS last_moment,
                 count(*) AS n, sum(amount) AS amount
          FROM orders GROUP BY ALL)
        SELECT bucket(last_moment, 86400) + INTERVAL 1 DAY AS event_time, count(*) AS windows,
               sum(n) AS n, sum(amount) AS amount
        FROM six_hourly GROUP BY ALL
        """,
    ),
}


def batch_answer(shape: Shape) -> list[dict]:
    """The same query over all the data at once, in DuckDB (``canonical``)."""
    return canonical(batch_rows(shape))


def batch_rows(shape: Shape) -> list[dict]:
    """``batch_answer`` as DuckDB gives it: its types, its order."""
    db = duckdb.connect()
    db.execute("SET TimeZone = 'UTC'")
    db.execute("CREATE MACRO bucket(t, seconds) AS to_timestamp(floor(epoch(t) / seconds) * seconds)")
    db.register("orders", pa.Table.from_pylist(ORDER_ROWS))
    db.register("shipments", pa.Table.from_pylist(SHIPMENT_ROWS))
    return db.sql(shape.batch_sql).arrow().read_all().to_pylist()


def canonical(rows: list[dict]) -> list[dict]:
    """Rows with integer counts and sums as ints, in one order (DuckDB's sums are HUGEINT)."""
    clean = [{k: int(v) if isinstance(v, int | float | Decimal) else v for k, v in r.items()} for r in rows]
    return sorted(clean, key=lambda r: tuple(str(v) for v in r.values()))


def in_pulls(rows: list[dict], pulls: int) -> list[list[dict]]:
    """``rows`` cut by event time into ``pulls`` consecutive parts of equal time span."""
    span = (LAST_EVENT - T0) / pulls
    bounds = [T0 + span * k for k in range(pulls)] + [LAST_EVENT + timedelta(seconds=1)]
    pairs = zip(bounds, bounds[1:], strict=False)
    return [[r for r in rows if lo <= r["event_time"] < hi] for lo, hi in pairs]
