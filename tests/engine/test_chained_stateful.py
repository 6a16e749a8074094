"""Chained stateful operators (a join or a window feeding another window) through the real
sandboxed engine.

The guarantee (DESIGN §9): whatever the slicing of the input - one call, two, four - every call
emits only rows its output watermark has passed and never a row behind the previous call's
output watermark, that watermark never passes the least input watermark, and once an
explicit watermark on every input passes all the data, the whole output equals the batch
answer of the same query, computed independently by DuckDB.
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from engine_testkit import input_schema, records

from tests.chained_streams import (
    FAR_WATERMARK,
    ORDER_ROWS,
    ORDERS_ID,
    SHAPES,
    SHIPMENT_ROWS,
    SHIPMENTS_ID,
    T0,
    batch_answer,
    canonical,
    in_pulls,
)

pytestmark = pytest.mark.spark

SCHEMAS = {
    ORDERS_ID: input_schema(order_id=pa.int64(), amount=pa.int64()),
    SHIPMENTS_ID: input_schema(order_id=pa.int64(), carrier=pa.string()),
}


@pytest.mark.parametrize("pulls", [1, 2, 4])
@pytest.mark.parametrize("shape", SHAPES)
def test_explicit_watermark_closes_every_window_whatever_the_slicing(make_chain, shape, pulls):
    chain = make_chain(SHAPES[shape].transform(), SCHEMAS)
    latest = {ORDERS_ID: T0, SHIPMENTS_ID: T0}  # an input's watermark: the latest event time it brought
    for orders, shipments in zip(in_pulls(ORDER_ROWS, pulls), in_pulls(SHIPMENT_ROWS, pulls), strict=True):
        result = chain.execute({ORDERS_ID: [orders], SHIPMENTS_ID: [shipments]})
        for dataset_id, rows in ((ORDERS_ID, orders), (SHIPMENTS_ID, shipments)):
            latest[dataset_id] = max([latest[dataset_id], *(r["event_time"] for r in rows)])
        assert result.output_watermark is None or result.output_watermark <= min(latest.values())
    closing = chain.execute(watermarks={ORDERS_ID: FAR_WATERMARK, SHIPMENTS_ID: FAR_WATERMARK})

    assert closing.output_watermark == FAR_WATERMARK - SHAPES[shape].lag
    assert sum(r.late_rows for r in chain.results) == 0  # each input in event-time order: none late
    assert canonical(chain.all_records()) == batch_answer(SHAPES[shape])
    # Every call emits rows its own output watermark has passed, none behind the previous one.
    previous = None
    for result in chain.results:
        for row in records(result.output_path):
            assert previous is None or row["event_time"] > previous
            assert row["event_time"] <= result.output_watermark
        previous = result.output_watermark
