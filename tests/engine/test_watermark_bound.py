"""No watermark runs ahead of its inputs, and rows dropped as late are counted (issue 31).

Every shape the engine runs is fed in two calls: one input lags the other (half its slices,
so its watermark is behind), then the rest comes with explicit watermarks that close it all.
Each call's output watermark must stay at or below the least input watermark, never move
back, and no later call may emit a row behind it (a window behind a join and a window behind a
window: tests/engine/test_chained_stateful.py). A join with no time bound keeps a side's rows
forever, so it holds the output watermark, and a window behind one (which Spark would let
drop that join's later rows) is refused. One module-scoped pipeline per shape family keeps the
Spark calls few.
"""
from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pytest
from engine_testkit import VOCAB, Chain, input_schema, records

from coordinator.engine.port import EngineError, EngineErrorKind, InputSchema, ValidateRequest
from coordinator.metadata.objects import SqlQueryStep, TransformSql
from tests.chained_streams import (
    FAR_WATERMARK,
    LAST_EVENT,
        ORDER_ROWS,
    ORDERS_ID,
    SHIPMENT_ROWS,
    SHIPMENTS_ID,
    T0,
)

pytestmark = pytest.mark.spark

SCHEMAS = {
    ORDERS_ID: input_schema(order_id=pa.int64(), amount=pa.int64()),
    SHIPMENTS_ID: input_schema(order_id=pa.int64(), carrier=pa.string()),
}
ORDERS, SHIPMENTS = f"`{ORDERS_ID}`", f"`{SHIPMENTS_ID}`"
COLUMNS = "o.order_id, o.amount, s.event_time AS shipped_at, s.carrier"
BOUNDED = "o.order_id = s.order_id AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL 2 DAYS"

BOUNDED_SHAPES = {
    "projection": f"SELECT event_time, order_id, amount * 2 AS doubled FROM {ORDERS}",
    "filter": f"SELECT * FROM {ORDERS} WHERE amount > 3",
    "union": f"SELECT event_time, order_id FROM {ORDERS} "
             f"UNION ALL SELECT event_time, order_id FROM {SHIPMENTS}",
    "inner-join": f"SELECT o.event_time, {COLUMNS} FROM {ORDERS} o JOIN {SHIPMENTS} s ON {BOUNDED}",
    "left-join": f"SELECT o.event_time, {COLUMNS} FROM {ORDERS} o LEFT JOIN {SHIPMENTS} s ON {BOUNDED}",
    "right-join": f"SELECT s.event_time, {COLUMNS} FROM {ORDERS} o RIGHT JOIN {SHIPMENTS} s ON {BOUNDED}",
    "full-join": f"SELECT coalesce(o.event_time, s.event_time) AS event_time, {COLUMNS} "
                 f"FROM {ORDERS} o FULL JOIN {SHIPMENTS} s ON {BOUNDED}",
    "window": f"SELECT window.end AS event_time, count(*) AS n FROM {ORDERS} "
              "GROUP BY window(event_time, '1 day')",
}
MIDDLE = T0 + (LAST_EVENT - T0) / 2


def _transform(shape: str | TransformSql) -> TransformSql:
    return shape if isinstance(shape, TransformSql) else TransformSql(engine="spark", query=shape)


@pytest.fixture(scope="module")
def chains(engine_client, engine_root) -> dict[str, Chain]:
    """Every bounded shape run in two calls: all orders but only the first half of the
    shipments (the lagging input), then the rest of the shipments and explicit watermarks."""
    early = [r for r in SHIPMENT_ROWS if r["event_time"] < MIDDLE]
    late = [r for r in SHIPMENT_ROWS if r["event_time"] >= MIDDLE]
    result = {}
    for name, shape in BOUNDED_SHAPES.items():
        chain = Chain(engine_client, engine_root.run / f"bound-{name}", engine_root.data / f"bound-{name}",
                      _transform(shape), SCHEMAS)
        chain.execute({ORDERS_ID: [ORDER_ROWS], SHIPMENTS_ID: [early]})
        chain.execute({SHIPMENTS_ID: [late]}, {ORDERS_ID: FAR_WATERMARK, SHIPMENTS_ID: FAR_WATERMARK})
        result[name] = chain
    return result


def input_watermarks_after_each_call() -> list:
    """The least input watermark after each call of ``chains`` (the shipments lag)."""
    return [max(r["event_time"] for r in SHIPMENT_ROWS if r["event_time"] < MIDDLE), FAR_WATERMARK]


@pytest.mark.parametrize("shape", BOUNDED_SHAPES)
def test_output_watermark_never_passes_the_least_input_watermark(chains, shape):
    for result, bound in zip(chains[shape].results, input_watermarks_after_each_call(), strict=True):
        assert result.output_watermark is None or result.output_watermark <= bound


@pytest.mark.parametrize("shape", BOUNDED_SHAPES)
def test_output_watermark_never_moves_back_and_no_row_comes_behind_it(chains, shape):
    previous = None
    for result in chains[shape].results:
        if previous is not None:
            assert result.output_watermark is not None and result.output_watermark >= previous
            assert all(row["event_time"] > previous for row in records(result.output_path))
        previous = result.output_watermark
    assert sum(r.late_rows for r in chains[shape].results) == 0  # fed in order: nothing is late


# ----- a join with no time bound: a dimension that changes -------------------------------------

EVENTS_ID, DIMENSION_ID = "wx.temps", "ref.airports"
EVENT_SCHEMAS = {
    EVENTS_ID: input_schema(iata=pa.string(), temp=pa.int64()),
    DIMENSION_ID: input_schema(iata=pa.string(), state=pa.string()),
}
PLAIN_JOIN = (f"SELECT e.event_time, e.iata, e.temp, d.state FROM `{EVENTS_ID}` e "
              f"JOIN `{DIMENSION_ID}` d ON e.iata = d.iata")
HOURLY = [{"event_time": T0 + timedelta(hours=6 * i), "iata": "AB"[i % 2], "temp": i} for i in range(40)]
AIRPORTS = [{"event_time": T0, "iata": "A", "state": "CA"}, {"event_time": T0, "iata": "B", "state": "NY"}]
RENAMED = [{"event_time": T0 + timedelta(days=12), "iata": "B", "state": "FL"}]


@pytest.fixture(scope="module")
def plain_join(engine_client, engine_root) -> Chain:
    """The events, then the dimension catching up, then a new version of one airport."""
    chain = Chain(engine_client, engine_root.run / "plain-join", engine_root.data / "plain-join",
                  _transform(PLAIN_JOIN), EVENT_SCHEMAS)
    chain.execute({EVENTS_ID: [HOURLY], DIMENSION_ID: [AIRPORTS]})
    chain.execute(watermarks={DIMENSION_ID: T0 + timedelta(days=11)})
    chain.execute({DIMENSION_ID: [RENAMED]})
    return chain


def test_a_join_with_no_time_bound_holds_the_output_watermark(plain_join):
    assert [r.output_watermark for r in plain_join.results] == [None, None, None]
    assert plain_join.results[0].num_records > 0


def test_a_join_with_no_time_bound_emits_every_old_event_again_for_a_new_version(plain_join):
    again = records(plain_join.results[-1].output_path)
    assert sorted(r["temp"] for r in again) == [r["temp"] for r in HOURLY if r["iata"] == "B"]
    assert {r["state"] for r in again} == {"FL"}


WINDOW_BEHIND_PLAIN_JOIN = TransformSql(engine="spark", queries=[
    SqlQueryStep(alias="joined", query=PLAIN_JOIN),
    SqlQueryStep(query="SELECT window.end AS event_time, state, count(*) AS n FROM joined "
                       "GROUP BY window(event_time, '1 day'), state"),
])


def test_a_window_behind_a_join_with_no_time_bound_is_refused_at_validation(engine_client):
    with pytest.raises(EngineError) as failure:
        engine_client.validate(ValidateRequest(
            transaction_id="validate-window-behind-plain-join", dataset_id="wx.state.daily",
            inputs=[InputSchema(i, VOCAB, s) for i, s in EVENT_SCHEMAS.items()],
            transform=WINDOW_BEHIND_PLAIN_JOIN, vocab=VOCAB,
        ))
    assert failure.value.kind is EngineErrorKind.UNSUPPORTED
    message = failure.value.message
    assert "\n" not in message
    assert "window or aggregation behind a stream-stream join with no time bound" in message
    assert "temporalTables" in message


def test_a_window_behind_a_join_with_no_time_bound_is_refused_when_executed(engine_client, engine_root):
    name = "window-plain-join"
    chain = Chain(engine_client, engine_root.run / name, engine_root.data / name, WINDOW_BEHIND_PLAIN_JOIN,
                  EVENT_SCHEMAS)
    with pytest.raises(EngineError) as failure:
        chain.execute({EVENTS_ID: [HOURLY], DIMENSION_ID: [AIRPORTS]})
    assert failure.value.kind is EngineErrorKind.UNSUPPORTED


# ----- rows behind the watermark are counted ---------------------------------------------------

# One order a day for ten days, then three stragglers each in a day the watermark has closed
# (one per window, so Spark's count of late groups is the count of late rows).
DAILY = [{"event_time": T0 + timedelta(days=d, hours=12), "order_id": d, "amount": 1} for d in range(10)]
STRAGGLERS = [{"event_time": T0 + timedelta(days=d, hours=1), "order_id": 100 + d, "amount": 1}
              for d in (2, 4, 6)]


def test_rows_a_window_drops_as_late_are_counted_in_the_call_that_dropped_them(engine_client, engine_root):
    chain = Chain(engine_client, engine_root.run / "late-window", engine_root.data / "late-window",
                  _transform(BOUNDED_SHAPES["window"]), {ORDERS_ID: SCHEMAS[ORDERS_ID]})
    first = chain.execute({ORDERS_ID: [DAILY]})
    second = chain.execute({ORDERS_ID: [STRAGGLERS]})
    assert (first.late_rows, second.late_rows) == (0, 3)
    assert second.num_records == 0
