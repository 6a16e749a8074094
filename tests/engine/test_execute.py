"""ExecuteQuery and MigrateQuery through the real sandboxed engine.

The central property (docs/architecture.md, Engines): results do not depend on how the input arrived, in one
slice or in many slices over many Execute calls, and they equal a batch computation over the
data whose windows the watermark has closed.
"""
from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from engine_testkit import OUTPUT_SYSTEM_TIME, T0, input_schema, records

from coordinator.engine.port import EngineError, EngineErrorKind, MigrateRequest
from coordinator.metadata.objects import TransformSql

pytestmark = pytest.mark.spark

READINGS_ID = "com.example.readings"
READINGS = {READINGS_ID: input_schema(v=pa.int64())}

HOURLY = """
SELECT window.end AS event_time, window.start AS window_start, count(*) AS n, sum(v) AS total
FROM `com.example.readings`
GROUP BY window(event_time, '1 hour')
"""

# A reading every 7 minutes for a bit over five hours; the last one is at 05:11.
READING_ROWS = [{"event_time": T0 + timedelta(minutes=3 + 7 * i), "v": i} for i in range(45)]


def by_time(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def hourly_batch(rows: list[dict], watermark) -> list[dict]:
    """The batch GROUP BY, keeping the windows a watermark has closed."""
    groups = defaultdict(list)
    for row in rows:
        groups[row["event_time"].replace(minute=0, second=0, microsecond=0)].append(row["v"])
    return by_time(
        {"event_time": start + timedelta(hours=1), "window_start": start, "n": len(vs), "total": sum(vs)}
        for start, vs in groups.items()
        if start + timedelta(hours=1) <= watermark
    )


def test_projection_and_filter(make_chain):
    chain = make_chain("SELECT *, v * 10 AS v10 FROM `com.example.readings` WHERE v % 2 = 0", READINGS)
    late, early = READING_ROWS[20:30], READING_ROWS[:20]
    result = chain.execute({READINGS_ID: [late, early]})  # slices out of event-time order

    table = pq.read_table(result.output_path)
    assert table.schema.names == ["system_time", "event_time", "v", "v10"]
    assert table.schema.field("system_time").type == pa.timestamp("us", tz="UTC")
    assert set(table.column("system_time").to_pylist()) == {OUTPUT_SYSTEM_TIME}
    expected = [{**r, "v10": r["v"] * 10} for r in READING_ROWS[:30] if r["v"] % 2 == 0]
    assert records(result.output_path) == expected  # ordered by event time
    assert result.num_records == len(expected)
    assert result.output_watermark == READING_ROWS[29]["event_time"]
    assert result.schema == table.schema

    nothing_new = chain.execute()
    assert (nothing_new.num_records, nothing_new.output_path) == (0, None)
    assert nothing_new.output_watermark == result.output_watermark


def test_tumbling_window_one_slice_equals_many_calls(make_chain):
    whole = make_chain(HOURLY, READINGS)
    whole.execute({READINGS_ID: [READING_ROWS]})

    pieces = make_chain(HOURLY, READINGS)
    pieces.execute({READINGS_ID: [READING_ROWS[:5], READING_ROWS[5:12]]})  # two slices, one call
    for chunk in (READING_ROWS[12:13], READING_ROWS[13:31], READING_ROWS[31:]):
        pieces.execute({READINGS_ID: [chunk]})

    last_event = READING_ROWS[-1]["event_time"]
    expected = hourly_batch(READING_ROWS, last_event)
    assert len(expected) == 5  # 00:00-05:00; the 05:00 window is still open
    assert by_time(whole.all_records()) == expected
    assert by_time(pieces.all_records()) == expected
    assert whole.results[-1].output_watermark == pieces.results[-1].output_watermark == last_event

    # Each window is emitted once, by the first call whose watermark passed its end.
    previous = T0
    for result in pieces.results:
        for row in records(result.output_path):
            assert previous < row["event_time"] <= result.output_watermark
        previous = result.output_watermark


def test_explicit_watermark_without_data_closes_a_window(make_chain):
    chain = make_chain(HOURLY, READINGS)
    chain.execute({READINGS_ID: [READING_ROWS]})
    assert all(r["event_time"] <= T0 + timedelta(hours=5) for r in chain.all_records())

    closing = chain.execute(watermarks={READINGS_ID: T0 + timedelta(hours=6)})
    assert records(closing.output_path) == [
        {"event_time": T0 + timedelta(hours=6), "window_start": T0 + timedelta(hours=5),
         "n": 2, "total": 43 + 44}
    ]
    assert closing.output_watermark == T0 + timedelta(hours=6)


def test_explicit_watermark_closes_a_window_behind_a_filter(make_chain):
    # Spark moves a WHERE clause that does not mention the event time below the watermark; the
    # marker row carrying the explicit watermark (nulls in v) must not be filtered out there.
    odd_hours = HOURLY.replace("GROUP BY", "WHERE v % 2 = 1 GROUP BY")
    chain = make_chain(odd_hours, READINGS)
    chain.execute({READINGS_ID: [READING_ROWS]})

    closing = chain.execute(watermarks={READINGS_ID: T0 + timedelta(hours=6)})
    assert records(closing.output_path) == [
        {"event_time": T0 + timedelta(hours=6), "window_start": T0 + timedelta(hours=5), "n": 1, "total": 43}
    ]


ORDERS_ID, SHIPMENTS_ID = "com.example.orders", "com.example.shipments"
ORDERS_AND_SHIPMENTS = {
    ORDERS_ID: input_schema(order_id=pa.int64(), amount=pa.float64()),
    SHIPMENTS_ID: input_schema(order_id=pa.int64(), carrier=pa.string()),
}
SHIPPED_WITHIN_TWO_DAYS = """
SELECT s.event_time AS event_time, o.order_id, o.event_time AS ordered_at, o.amount, s.carrier
FROM `com.example.orders` AS o
JOIN `com.example.shipments` AS s
  ON o.order_id = s.order_id
 AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL 2 DAYS
"""
ORDER_ROWS = [
    {"event_time": T0 + timedelta(hours=10 * i, minutes=i), "order_id": i, "amount": 10.0 + i}
    for i in range(24)
]
# Shipped 5 h, 30 h, 47 h or 60 h (too late) after the order; every fifth order never ships.
SHIPMENT_ROWS = sorted(
    (
        {"event_time": o["event_time"] + timedelta(hours=(5, 30, 47, 60)[o["order_id"] % 4]),
         "order_id": o["order_id"], "carrier": f"carrier-{o['order_id'] % 3}"}
        for o in ORDER_ROWS
        if o["order_id"] % 5 != 4
    ),
    key=lambda r: r["event_time"],
)


def test_interval_join_one_slice_equals_many_calls(make_chain):
    whole = make_chain(SHIPPED_WITHIN_TWO_DAYS, ORDERS_AND_SHIPMENTS)
    whole.execute({ORDERS_ID: [ORDER_ROWS], SHIPMENTS_ID: [SHIPMENT_ROWS]})

    pieces = make_chain(SHIPPED_WITHIN_TWO_DAYS, ORDERS_AND_SHIPMENTS)
    bounds = [T0 + timedelta(hours=h) for h in (0, 60, 125, 190, 1000)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        pieces.execute({
            ORDERS_ID: [[r for r in ORDER_ROWS if start <= r["event_time"] < end]],
            SHIPMENTS_ID: [[r for r in SHIPMENT_ROWS if start <= r["event_time"] < end]],
        })

    orders = {o["order_id"]: o for o in ORDER_ROWS}
    expected = by_time(
        {"event_time": s["event_time"], "order_id": s["order_id"],
         "ordered_at": orders[s["order_id"]]["event_time"], "amount": orders[s["order_id"]]["amount"],
         "carrier": s["carrier"]}
        for s in SHIPMENT_ROWS
        if s["event_time"] - orders[s["order_id"]]["event_time"] <= timedelta(days=2)
    )
    assert len(expected) == 15
    assert by_time(whole.all_records()) == expected
    assert by_time(pieces.all_records()) == expected
    # The output watermark is the slower input's, less the 2 days (and 1 ms, Spark's bound for
    # BETWEEN) an order waits in the join's state for a shipment: it may still be emitted.
    slower = min(ORDER_ROWS[-1]["event_time"], SHIPMENT_ROWS[-1]["event_time"])
    assert pieces.results[-1].output_watermark == slower - timedelta(days=2, milliseconds=1)


def test_rerunning_a_transaction_gives_the_same_result(make_chain, engine_client):
    chain = make_chain(HOURLY, READINGS)
    chain.execute({READINGS_ID: [READING_ROWS[:15]]})
    start = chain.checkpoint

    request = chain.prepare({READINGS_ID: [READING_ROWS[15:30]]})
    first = engine_client.execute(request)
    retry = dataclasses.replace(
        request,
        new_checkpoint_dir=request.new_checkpoint_dir.with_name("checkpoint-retry"),
        output_data_path=request.output_data_path.with_name("output-retry.parquet"),
    )
    second = engine_client.execute(retry)

    assert first.num_records == second.num_records > 0
    assert first.output_watermark == second.output_watermark
    assert request.output_data_path.read_bytes() == retry.output_data_path.read_bytes()
    states = [json.loads((r.new_checkpoint_dir / "engine.json").read_text()) for r in (request, retry)]
    assert states[0] == states[1]
    assert sorted(p.name for p in start.iterdir()) == ["engine.json", "spark"]  # untouched input

    # Both checkpoints carry the same streaming state: the next call agrees too.
    outputs = []
    for checkpoint in (request.new_checkpoint_dir, retry.new_checkpoint_dir):
        chain.checkpoint = checkpoint
        outputs.append(chain.execute({READINGS_ID: [READING_ROWS[30:]]}).output_path.read_bytes())
    assert outputs[0] == outputs[1]


def test_checkpoint_of_another_query_is_refused(make_chain):
    chain = make_chain(HOURLY, READINGS)
    chain.execute({READINGS_ID: [READING_ROWS[:10]]})
    chain.transform = TransformSql(engine="spark", query="SELECT * FROM `com.example.readings`")
    with pytest.raises(EngineError, match="MigrateQuery") as failure:
        chain.execute({READINGS_ID: [READING_ROWS[10:20]]})
    assert failure.value.kind is EngineErrorKind.INVALID_REQUEST


def test_migrate_same_query_carries_open_windows(make_chain, engine_client):
    chain = make_chain(HOURLY, READINGS)
    chain.execute({READINGS_ID: [READING_ROWS[:22]]})  # up to 02:30: windows 0 and 1 closed
    migrated = chain.run_dir / "migrated"
    result = engine_client.migrate(MigrateRequest(
        transaction_id="tx-m", dataset_id="x", prev_transform=chain.transform,
        next_transform=chain.transform, prev_checkpoint_dir=chain.checkpoint, new_checkpoint_dir=migrated,
    ))
    assert result.state_carried

    chain.checkpoint = migrated
    closing = chain.execute(watermarks={READINGS_ID: T0 + timedelta(hours=3)})
    assert records(closing.output_path) == hourly_batch(READING_ROWS[:22], T0 + timedelta(hours=3))[-1:]


def test_migrate_to_a_new_query_keeps_watermarks(make_chain, engine_client):
    chain = make_chain(HOURLY, READINGS)
    chain.execute({READINGS_ID: [READING_ROWS[:22]]})
    with_top = HOURLY.replace("sum(v) AS total", "sum(v) AS total, max(v) AS top")
    new_query = TransformSql(engine="spark", query=with_top)
    migrated = chain.run_dir / "migrated"
    result = engine_client.migrate(MigrateRequest(
        transaction_id="tx-m", dataset_id="x", prev_transform=chain.transform,
        next_transform=new_query, prev_checkpoint_dir=chain.checkpoint, new_checkpoint_dir=migrated,
    ))
    assert not result.state_carried and "dropped" in result.message

    chain.transform, chain.checkpoint = new_query, migrated
    after = chain.execute({READINGS_ID: [READING_ROWS[26:40]]})  # 03:05 to 04:36
    # The 02:00 window was open under the old query and is dropped; 03:00 is the first new one.
    assert records(after.output_path) == [
        {"event_time": T0 + timedelta(hours=4), "window_start": T0 + timedelta(hours=3), "n": 8,
         "total": sum(range(26, 34)), "top": 33}
    ]
    assert after.output_watermark == READING_ROWS[39]["event_time"]
