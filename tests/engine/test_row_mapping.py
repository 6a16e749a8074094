"""DeriveRowMapping: whether a transform's plan is projections, filters and aliases over one input
(else the operator that is not) and which output columns copy an input column, per query shape.

Each expected answer is worked out by hand from the SQL."""
from __future__ import annotations

import pyarrow as pa
import pytest
from engine_testkit import VOCAB

from coordinator.engine.port import InputSchema, RowMapping, RowMappingRequest
from coordinator.metadata.objects import SqlQueryStep, TransformSql

pytestmark = pytest.mark.spark

TS = pa.timestamp("us", tz="UTC")
# a 0.39 slice's columns: offset and op are data to the engine
CITIES = InputSchema("cities", VOCAB, pa.schema([
    ("offset", pa.int64()), ("op", pa.int32()), ("system_time", TS), ("event_time", TS),
    ("id", pa.int64()), ("pop", pa.int64())]))
CODES = InputSchema("codes", VOCAB, pa.schema([("system_time", TS), ("event_time", TS),
                                               ("id", pa.int64()), ("code", pa.string())]))
ALL = {c: c for c in CITIES.schema.names}


def mapping(engine_client, *steps: str | tuple[str, str]) -> RowMapping:
    queries = [SqlQueryStep(alias=s[0], query=s[1]) if isinstance(s, tuple) else SqlQueryStep(query=s)
               for s in steps]
    return engine_client.derive_row_mapping(RowMappingRequest(
        transaction_id="rows", dataset_id="out", inputs=[CITIES, CODES],
        transform=TransformSql(engine="spark", queries=queries), vocab=VOCAB))


@pytest.mark.parametrize(("steps", "copies", "filtered"), [
    (["SELECT * FROM cities WHERE pop > 10"], ALL, ("pop",)),
    (["SELECT op, `offset` AS o, event_time, id AS key, pop * 2 AS twice FROM cities"],
     {"op": "op", "o": "offset", "event_time": "event_time", "key": "id"}, ()),
    (["SELECT CAST(op AS BIGINT) AS op, event_time FROM (SELECT * FROM cities) t WHERE id = 1"],
     {"event_time": "event_time"}, ("id",)),
    (["WITH big AS (SELECT * FROM cities WHERE pop > 10) SELECT op, event_time FROM big"],
     {"op": "op", "event_time": "event_time"}, ("pop",)),
    ([("big", "SELECT * FROM cities WHERE pop > 10"), "SELECT op, `offset`, event_time FROM big"],
     {"op": "op", "offset": "offset", "event_time": "event_time"}, ("pop",)),
    (["SELECT * FROM (SELECT *, op + id AS k FROM cities) WHERE k > 0 AND event_time > '2024-01-01'"],
     ALL, ("event_time", "id", "op")),  # k is computed: no copy
], ids=["star", "renamed", "cast-is-no-copy", "cte", "steps", "filter-on-computed"])
def test_projections_and_filters_over_one_input_are_row_wise(engine_client, steps, copies, filtered):
    answer = mapping(engine_client, *steps)
    assert (answer.operator, answer.input) == (None, "cities")
    assert (answer.copies, answer.filtered) == (copies, filtered)


def test_each_output_column_names_the_input_columns_it_is_computed_from(engine_client):
    answer = mapping(engine_client, "SELECT event_time, op + id AS k, 1 AS one, pop FROM "
                                    "(SELECT *, pop * 2 AS twice FROM cities) WHERE twice > 0")
    assert answer.sources == {"event_time": ("event_time",), "k": ("id", "op"), "one": (),
                              "pop": ("pop",)}


@pytest.mark.parametrize(("query", "operator"), [
    ("SELECT max(event_time) AS event_time, count(*) AS n FROM cities GROUP BY id", "Aggregate"),
    ("SELECT c.* FROM cities c JOIN codes k ON c.id = k.id", "Join"),
    ("SELECT *, row_number() OVER (PARTITION BY id ORDER BY event_time) AS n FROM cities", "Window"),
    ("SELECT DISTINCT event_time, id FROM cities", "Distinct"),
    ("SELECT * FROM cities ORDER BY pop LIMIT 3", "Sort/Limit"),
    ("SELECT event_time, id FROM cities UNION ALL SELECT event_time, id FROM codes", "Union"),
    ("SELECT * FROM cities WHERE id IN (SELECT id FROM codes)", "Subquery"),
    ("SELECT event_time, explode(array(1, 2)) AS k FROM cities", "Generate"),
], ids=["aggregate", "join", "window", "distinct", "sort-limit", "union", "subquery", "generate"])
def test_any_other_operator_is_named(engine_client, query, operator):
    assert mapping(engine_client, query) == RowMapping(operator, None, {})  # nothing else
