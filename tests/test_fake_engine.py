"""The DuckDB test engine keeps to what it can answer as Spark would (tests/fake_engine.py)."""
from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.engine.port import (
    EngineError,
    EngineErrorKind,
    ExecuteInput,
    ExecuteRequest,
    InputSchema,
    ValidateRequest,
)
from coordinator.metadata.objects import DatasetVocabulary, TransformSql

from .support.fake_engine import FakeEngine

VOCAB = DatasetVocabulary()
T = datetime(2024, 1, 1, tzinfo=UTC)
UTC_US = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema([("system_time", UTC_US), ("event_time", UTC_US), ("k", pa.int64()), ("v", pa.string())])


def sql(query: str) -> TransformSql:
    return TransformSql(engine="spark", query=query)


def slice_file(path, rows: list[tuple[int, int, str]]):
    """rows: (minute, k, v)"""
    pq.write_table(pa.table({
        "system_time": pa.array([T] * len(rows), SCHEMA.field("system_time").type),
        "event_time": pa.array([T.replace(minute=m) for m, _, _ in rows], SCHEMA.field("event_time").type),
        "k": [k for _, k, _ in rows], "v": [v for *_, v in rows]}, schema=SCHEMA), path)
    return path


@pytest.mark.parametrize("query, what", [
    ("SELECT max(event_time) AS event_time, k FROM `a` GROUP BY k", "GROUP BY"),
    ("SELECT DISTINCT event_time, k FROM `a`", "DISTINCT"),
    ("SELECT event_time, k FROM `a` ORDER BY k LIMIT 1", "ORDER"),
    ("SELECT event_time, row_number() OVER (ORDER BY k) AS n FROM `a`", "window function"),
    ("SELECT event_time, k FROM `a` UNION SELECT event_time, k FROM `b`", "UNION"),
])
def test_queries_that_keep_streaming_state_are_refused(tmp_path, query, what):
    inputs = [InputSchema("a", VOCAB, SCHEMA), InputSchema("b", VOCAB, SCHEMA)]
    with pytest.raises(EngineError, match=what) as refused:
        FakeEngine(tmp_path).validate(ValidateRequest(transaction_id="t", dataset_id="out", inputs=inputs,
                                                      transform=sql(query), vocab=VOCAB))
    assert refused.value.kind is EngineErrorKind.UNSUPPORTED


def test_a_join_matches_new_rows_with_old_ones_once(tmp_path):
    """Two calls: a's rows come first, b's later; the second call emits the matches, once."""
    engine = FakeEngine(tmp_path)
    query = sql("SELECT a.event_time, a.k, a.v AS left_v, b.v AS right_v FROM `a` JOIN `b` ON a.k = b.k")
    a1 = slice_file(tmp_path / "a1.parquet", [(1, 1, "x"), (2, 2, "y")])
    b1 = slice_file(tmp_path / "b1.parquet", [(3, 1, "p")])

    def call(name: str, a: list, b: list, prev=None):
        work = engine.workdir(name)
        request = ExecuteRequest(
            transaction_id=name, dataset_id="out",
            inputs=[ExecuteInput("a", VOCAB, SCHEMA, a), ExecuteInput("b", VOCAB, SCHEMA, b)],
            transform=query, vocab=VOCAB, prev_checkpoint_dir=prev, new_checkpoint_dir=work / "checkpoint",
            output_data_path=work / "out.parquet", system_time=T.replace(hour=9))
        return engine.execute(request), request.new_checkpoint_dir

    first, checkpoint = call("t1", [a1], [])
    assert first.num_records == 0 and first.output_path is None
    assert first.output_watermark is None  # b has no watermark yet
    second, _ = call("t2", [], [b1], prev=checkpoint)
    out = pq.read_table(second.output_path)
    assert out.column_names == ["system_time", "event_time", "k", "left_v", "right_v"]
    assert out.drop_columns(["system_time", "event_time"]).to_pylist() == [
        {"k": 1, "left_v": "x", "right_v": "p"}]
    assert second.output_watermark == T.replace(minute=2)  # the least of a's (2) and b's (3)
