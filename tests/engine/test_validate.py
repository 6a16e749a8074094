"""ValidateQuery: the output schema of a good query, Spark's own words and position for a bad one."""
from __future__ import annotations

import pyarrow as pa
import pytest
from engine_testkit import VOCAB, input_schema

from coordinator.engine.port import EngineError, EngineErrorKind, InputSchema, ValidateRequest
from coordinator.metadata.objects import SqlQueryStep, TransformSql

pytestmark = pytest.mark.spark

ORDERS = InputSchema("com.example.orders", VOCAB, input_schema(order_id=pa.int64(), amount=pa.float64()))


def sql(query: str) -> TransformSql:
    return TransformSql(engine="spark", query=query)


def validate(engine_client, transform: TransformSql, dataset_id: str = "x"):
    return engine_client.validate(ValidateRequest(
        transaction_id=f"validate-{dataset_id}", dataset_id=dataset_id, inputs=[ORDERS],
        transform=transform, vocab=VOCAB,
    ))


def test_output_schema(engine_client):
    result = validate(
        engine_client,
        sql("SELECT *, amount * 2 AS doubled FROM `com.example.orders` WHERE amount > 10"),
        "com.example.big_orders",
    )
    ts = pa.timestamp("us", tz="UTC")
    assert result.schema == pa.schema(
        [("system_time", ts), ("event_time", ts), ("order_id", pa.int64()),
         ("amount", pa.float64()), ("doubled", pa.float64())]
    )
    assert result.ddl.startswith("system_time TIMESTAMP,event_time TIMESTAMP")


def test_query_steps_with_aliases(engine_client):
    transform = TransformSql(
        engine="spark",
        queries=[
            SqlQueryStep(alias="big", query="SELECT * FROM `com.example.orders` WHERE amount > 10"),
            SqlQueryStep(query="SELECT event_time, order_id FROM big"),
        ],
    )
    result = validate(engine_client, transform)
    assert result.schema.names == ["system_time", "event_time", "order_id"]


def test_unknown_column_reports_spark_message_and_position(engine_client):
    query = "SELECT event_time,\n  amount, nope\nFROM `com.example.orders`"
    with pytest.raises(EngineError) as failure:
        validate(engine_client, sql(query))
    error = failure.value
    assert error.kind is EngineErrorKind.INVALID_QUERY
    assert "UNRESOLVED_COLUMN" in error.message and "`nope`" in error.message
    assert "Project" not in error.message  # no logical plan dump
    assert (error.position.line, error.position.column, error.position.fragment) == (2, 10, "nope")
    assert "line 2, column 10" in str(error)


def test_syntax_error_position(engine_client):
    query = "SELECT event_time\nFROM `com.example.orders` WHERE amount >"
    with pytest.raises(EngineError) as failure:
        validate(engine_client, sql(query))
    assert failure.value.kind is EngineErrorKind.INVALID_QUERY
    assert "PARSE_SYNTAX_ERROR" in failure.value.message
    assert "\n" not in failure.value.message and "== SQL ==" not in failure.value.message  # one line
    assert failure.value.position.line == 2


def test_missing_event_time_column(engine_client):
    with pytest.raises(EngineError, match="no column `event_time`"):
        validate(engine_client, sql("SELECT order_id FROM `com.example.orders`"))


def test_streaming_only_errors_are_found(engine_client):
    # Valid SQL, but an aggregation over all time never closes in a stream.
    query = "SELECT max(event_time) AS event_time, count(*) AS n FROM `com.example.orders`"
    with pytest.raises(EngineError) as failure:
        validate(engine_client, sql(query))
    assert failure.value.kind is EngineErrorKind.INVALID_QUERY
    assert "aggregat" in failure.value.message.lower()


def test_window_over_an_earlier_window_end_is_refused_naming_the_shape(engine_client):
    # window.end is a plain timestamp: Spark cannot close the second window, so it refuses.
    transform = TransformSql(
        engine="spark",
        queries=[
            SqlQueryStep(alias="hourly", query="SELECT window.end AS event_time, count(*) AS n "
                         "FROM `com.example.orders` GROUP BY window(event_time, '1 hour')"),
            SqlQueryStep(query="SELECT window.end AS event_time, sum(n) AS n "
                         "FROM hourly GROUP BY window(event_time, '1 day')"),
        ],
    )
    with pytest.raises(EngineError) as failure:
        validate(engine_client, transform)
    assert failure.value.kind is EngineErrorKind.INVALID_QUERY
    assert "aggregations without watermark" in failure.value.message
    assert "window_time(window)" in failure.value.message
    assert "\n" not in failure.value.message  # one line, no plan
