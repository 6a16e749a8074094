"""DeriveLineage: the column lineage of a transform, from Spark's analysed plan, per query shape.

Each expected answer is worked out by hand from the SQL: which input columns each output column
reads, how, and which columns only decide which rows exist."""
from __future__ import annotations

import pyarrow as pa
import pytest
from engine_testkit import VOCAB, input_schema

from coordinator.engine.port import EngineError, EngineErrorKind, InputSchema, LineageRequest
from coordinator.metadata.objects import SqlQueryStep, TransformSql

pytestmark = pytest.mark.spark

ORDERS = InputSchema("shop.orders", VOCAB, input_schema(order_id=pa.int64(), customer=pa.string(),
                                                        amount=pa.float64()))
CUSTOMERS = InputSchema("shop.customers", VOCAB, input_schema(customer=pa.string(), city=pa.string()))


def derive(engine_client, *steps: str | tuple[str, str]):
    queries = [SqlQueryStep(alias=s[0], query=s[1]) if isinstance(s, tuple) else SqlQueryStep(query=s)
               for s in steps]
    lineage = engine_client.derive_field_lineage(LineageRequest(
        transaction_id="lineage", dataset_id="out", inputs=[ORDERS, CUSTOMERS],
        transform=TransformSql(engine="spark", queries=queries), vocab=VOCAB,
    ))
    fields = {f.field: {(s.input, s.field, s.kind) for s in f.sources} for f in lineage.fields}
    conditions = {(c.input, c.field, c.kind) for c in lineage.conditions or []}
    return lineage, fields, conditions


def test_projection_with_rename_expression_and_filter(engine_client):
    lineage, fields, conditions = derive(
        engine_client, "SELECT event_time, order_id AS id, amount * 2 AS doubled "
                       "FROM `shop.orders` WHERE amount > 10")
    assert [f.field for f in lineage.fields] == ["event_time", "id", "doubled"]
    assert fields == {
        "event_time": {("shop.orders", "event_time", "copy")},
        "id": {("shop.orders", "order_id", "copy")},
        "doubled": {("shop.orders", "amount", "transform")},
    }
    assert lineage.fields[2].sources[0].expression == "amount * 2"
    assert conditions == {("shop.orders", "amount", "filter")}


def test_select_star_copies_every_column(engine_client):
    _, fields, conditions = derive(engine_client, "SELECT * FROM `shop.orders`")
    assert fields == {c: {("shop.orders", c, "copy")}
                      for c in ("event_time", "order_id", "customer", "amount")}
    assert conditions == set()


def test_aliased_steps_and_cte_compose_through_each_step(engine_client):
    _, fields, conditions = derive(
        engine_client,
        ("big", "SELECT event_time, customer, amount + 1 AS a1 FROM `shop.orders` WHERE order_id > 0"),
        "WITH c AS (SELECT event_time, customer AS who, a1 * 2 AS a2 FROM big) "
        "SELECT event_time, who, a2 FROM (SELECT * FROM c) sub",
    )
    assert fields == {
        "event_time": {("shop.orders", "event_time", "copy")},
        "who": {("shop.orders", "customer", "copy")},
        "a2": {("shop.orders", "amount", "transform")},
    }
    assert conditions == {("shop.orders", "order_id", "filter")}


def test_expressions_along_steps_are_listed_output_side_first(engine_client):
    lineage, _, _ = derive(
        engine_client, ("s", "SELECT event_time, amount + 1 AS a1 FROM `shop.orders`"),
        "SELECT event_time, a1 * 2 AS a2 FROM s")
    assert lineage.fields[1].sources[0].expression == "a1 * 2 <- amount + 1"


def test_join_with_case_reads_both_sides_and_keys_are_join_conditions(engine_client):
    _, fields, conditions = derive(
        engine_client,
        "SELECT o.event_time, c.city, CASE WHEN o.amount > 100 THEN c.city ELSE 'small' END AS label "
        "FROM `shop.orders` o JOIN `shop.customers` c ON o.customer = c.customer")
    assert fields == {
        "event_time": {("shop.orders", "event_time", "copy")},
        "city": {("shop.customers", "city", "copy")},
        "label": {("shop.orders", "amount", "transform"), ("shop.customers", "city", "transform")},
    }
    assert conditions == {("shop.orders", "customer", "join"), ("shop.customers", "customer", "join")}


def test_group_by_aggregates_and_keys(engine_client):
    _, fields, conditions = derive(
        engine_client,
        "SELECT max(event_time) AS event_time, customer, sum(amount) AS total, count(*) AS n "
        "FROM `shop.orders` GROUP BY customer")
    assert fields == {
        "event_time": {("shop.orders", "event_time", "aggregate")},
        "customer": {("shop.orders", "customer", "copy")},
        "total": {("shop.orders", "amount", "aggregate")},
        "n": set(),  # counts rows: only the conditions decide it
    }
    assert conditions == {("shop.orders", "customer", "groupBy")}


def test_event_time_window(engine_client):
    _, fields, conditions = derive(
        engine_client,
        "SELECT window(event_time, '1 hour').start AS event_time, sum(amount) AS total "
        "FROM `shop.orders` GROUP BY window(event_time, '1 hour')")
    assert fields == {
        "event_time": {("shop.orders", "event_time", "window")},
        "total": {("shop.orders", "amount", "aggregate")},
    }
    # window() drops rows without an event time through a filter Spark adds: the window's own
    # condition, not a filter the query wrote
    assert conditions == {("shop.orders", "event_time", "window")}


def test_window_function_partition_and_order_are_window_sources(engine_client):
    _, fields, _ = derive(
        engine_client,
        "SELECT event_time, sum(amount) OVER (PARTITION BY customer ORDER BY event_time) AS running "
        "FROM `shop.orders`")
    assert fields["running"] == {("shop.orders", "amount", "aggregate"),
                                 ("shop.orders", "customer", "window"),
                                 ("shop.orders", "event_time", "window")}


def test_stack_and_explode(engine_client):
    _, fields, _ = derive(
        engine_client,
        ("s", "SELECT event_time, stack(2, customer, CAST(order_id AS STRING)) AS who FROM `shop.orders`"),
        "SELECT event_time, who, e FROM s LATERAL VIEW explode(array(1, 2)) t AS e")
    assert fields["who"] == {("shop.orders", "customer", "transform"),
                             ("shop.orders", "order_id", "transform")}
    assert fields["e"] == set()  # a literal array: no input column


def test_union_and_subquery(engine_client):
    _, fields, conditions = derive(
        engine_client,
        "SELECT event_time, customer AS who FROM `shop.orders` "
        "WHERE customer IN (SELECT customer FROM `shop.customers` WHERE city = 'Oslo') "
        "UNION ALL SELECT event_time, city FROM `shop.customers`")
    assert fields["who"] == {("shop.orders", "customer", "copy"), ("shop.customers", "city", "copy")}
    assert conditions == {("shop.orders", "customer", "filter"), ("shop.customers", "customer", "filter"),
                          ("shop.customers", "city", "filter")}


def test_bad_query_is_reported_like_validate(engine_client):
    with pytest.raises(EngineError) as failure:
        derive(engine_client, "SELECT nope FROM `shop.orders`")
    assert failure.value.kind is EngineErrorKind.INVALID_QUERY


def test_an_operator_the_engine_cannot_trace_is_named_not_guessed(engine_client):
    with pytest.raises(EngineError) as failure:
        derive(engine_client, "SELECT o.event_time, x.w FROM `shop.orders` o, "
                              "LATERAL (SELECT o.amount + 1 AS w) x")
    assert failure.value.kind is EngineErrorKind.UNSUPPORTED
    assert "LateralJoin" in failure.value.message
