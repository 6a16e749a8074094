"""A step that needs no streaming state runs as one plain batch (streaming.py, ``_planned``):
the rows the streaming query would emit, the output watermark its plan would derive, and a
checkpoint without Spark's streaming state; a step with state still streams.
"""
from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pytest
from engine_testkit import T0, input_schema, records

pytestmark = pytest.mark.spark

READINGS, METERS = "com.example.readings", "com.example.meters"
SCHEMAS = {READINGS: input_schema(v=pa.int64()), METERS: input_schema(v=pa.int64())}
ROWS = [{"event_time": T0 + timedelta(minutes=5 * i), "v": i} for i in range(30)]
METER_ROWS = [{"event_time": T0 + timedelta(minutes=4 * i), "v": 100 + i} for i in range(30)]


def test_a_filter_step_writes_the_filtered_rows_and_no_streaming_state(make_chain):
    chain = make_chain(f"SELECT event_time, v FROM `{READINGS}` WHERE v % 3 = 0",
                       {READINGS: SCHEMAS[READINGS]})
    first = chain.execute({READINGS: [ROWS[:10]]})
    second = chain.execute({READINGS: [ROWS[10:20], ROWS[20:]]})

    assert records(first.output_path) + records(second.output_path) == [r for r in ROWS if r["v"] % 3 == 0]
    assert first.output_watermark == ROWS[9]["event_time"]
    assert second.output_watermark == ROWS[-1]["event_time"]
    assert sorted(p.name for p in chain.checkpoint.iterdir()) == ["engine.json"]


def test_a_union_cut_into_calls_gives_the_rows_and_watermark_of_one_call(make_chain):
    query = f"SELECT event_time, v FROM `{READINGS}` UNION ALL SELECT event_time, v FROM `{METERS}`"
    whole = make_chain(query, SCHEMAS).execute({READINGS: [ROWS], METERS: [METER_ROWS]})
    pieces = make_chain(query, SCHEMAS)
    cut = [pieces.execute({READINGS: [ROWS[a:b]], METERS: [METER_ROWS[a:b]]}) for a, b in ((0, 7), (7, 30))]

    by_time_then_value = sorted(ROWS + METER_ROWS, key=lambda r: (r["event_time"], r["v"]))
    assert records(whole.output_path) == by_time_then_value
    assert sorted(records(cut[0].output_path) + records(cut[1].output_path),
                  key=lambda r: (r["event_time"], r["v"])) == by_time_then_value
    # the least of the inputs' watermarks: the meters' last reading comes before the readings'
    assert whole.output_watermark == cut[1].output_watermark == METER_ROWS[-1]["event_time"]
    assert cut[0].output_watermark == METER_ROWS[6]["event_time"]


def test_a_window_step_still_streams_with_its_state(make_chain):
    chain = make_chain(f"SELECT window.end AS event_time, count(*) AS n FROM `{READINGS}` "
                       "GROUP BY window(event_time, '1 hour')", {READINGS: SCHEMAS[READINGS]})
    chain.execute({READINGS: [ROWS[:13]]})  # up to 01:00: the first hour closes

    assert sorted(p.name for p in chain.checkpoint.iterdir()) == ["engine.json", "spark"]
    assert records(chain.results[-1].output_path) == [{"event_time": T0 + timedelta(hours=1), "n": 12}]
