"""Where an input's watermark comes from: the transform's rule (``inputWatermarks``).

Under ``recorded`` (ODF's rule, what ``coord add`` writes for a new derivative) an input's
watermark is what its dataset recorded, the explicit watermarks, and its rows never move it;
under ``eventTimes`` (a transform without the field: datasets added before the rule) the
latest event time seen moves it too. The input here is what a time-bounded join upstream
emits: rows up to 05:10 with a recorded watermark of 02:00, then rows from 02:20 on with a
watermark of 06:00. An hourly window over it, one chain per rule, in two calls each.
"""
from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import pyarrow as pa
import pytest
from engine_testkit import T0, Chain, hours, input_schema, records

from coordinator.engine.port import EngineError, EngineErrorKind, MigrateRequest
from coordinator.metadata.objects import InputWatermarks, TransformSql

pytestmark = pytest.mark.spark

JOINED = "com.example.joined"
SCHEMAS = {JOINED: input_schema(v=pa.int64())}
HOURLY = (f"SELECT window.end AS event_time, count(*) AS n, sum(v) AS total FROM `{JOINED}` "
          "GROUP BY window(event_time, '1 hour')")
FIRST = [{"event_time": T0 + hours(h) + timedelta(minutes=10), "v": h} for h in range(6)]
SECOND = [{"event_time": T0 + hours(h) + timedelta(minutes=20), "v": 100 + h} for h in range(2, 8)]
WATERMARKS = [T0 + hours(2), T0 + hours(6)]  # what the input recorded with each delivery


def run(chain: Chain, calls: int = 2) -> Chain:
    for rows, watermark in list(zip([FIRST, SECOND], WATERMARKS, strict=True))[:calls]:
        chain.execute({JOINED: [rows]}, {JOINED: watermark})
    return chain


def expected_windows(rows: list[dict], watermark) -> Counter:
    """The batch answer: every hour's count and sum whose window the watermark has closed."""
    groups: dict = {}
    for row in rows:
        end = row["event_time"].replace(minute=0) + hours(1)
        n, total = groups.get(end, (0, 0))
        groups[end] = (n + 1, total + row["v"])
    return Counter((end, n, total) for end, (n, total) in groups.items() if end <= watermark)


def windows(chain: Chain) -> Counter:
    return Counter((r["event_time"], r["n"], r["total"]) for r in chain.all_records())


@pytest.fixture(scope="module")
def recorded(engine_client, engine_root) -> Chain:
    transform = TransformSql(engine="spark", query=HOURLY, input_watermarks=InputWatermarks.RECORDED)
    return run(Chain(engine_client, engine_root.run / "rule-recorded", engine_root.data / "rule-recorded",
                     transform, SCHEMAS))


@pytest.fixture(scope="module")
def event_times(engine_client, engine_root) -> Chain:
    transform = TransformSql(engine="spark", query=HOURLY)  # no rule: a transform added before it
    return run(Chain(engine_client, engine_root.run / "rule-event-times",
                     engine_root.data / "rule-event-times", transform, SCHEMAS))


def test_recorded_rule_takes_the_input_watermark_from_its_recorded_watermarks_only(recorded):
    assert [r.output_watermark for r in recorded.results] == WATERMARKS


def test_recorded_rule_drops_none_of_the_rows_behind_the_latest_event_time(recorded):
    assert [r.late_rows for r in recorded.results] == [0, 0]
    assert windows(recorded) == expected_windows(FIRST + SECOND, WATERMARKS[-1])


def test_recorded_rule_closes_each_window_only_once_the_recorded_watermark_passes_it(recorded):
    first_call = Counter((r["event_time"], r["n"], r["total"])
                         for r in records(recorded.results[0].output_path))
    assert first_call == expected_windows(FIRST, WATERMARKS[0])


def test_event_times_rule_of_older_transforms_still_moves_the_watermark_with_the_rows(event_times):
    assert event_times.results[0].output_watermark == FIRST[-1]["event_time"]
    assert event_times.results[1].late_rows > 0  # the hours before 05:10 came too late


def test_a_checkpoint_is_not_continued_under_the_other_rule(engine_client, engine_root):
    chain = run(Chain(engine_client, engine_root.run / "rule-switch", engine_root.data / "rule-switch",
                      TransformSql(engine="spark", query=HOURLY), SCHEMAS), calls=1)
    chain.transform = TransformSql(engine="spark", query=HOURLY, input_watermarks=InputWatermarks.RECORDED)
    with pytest.raises(EngineError) as refused:
        chain.execute({JOINED: [SECOND]}, {JOINED: WATERMARKS[1]})
    assert refused.value.kind is EngineErrorKind.INVALID_REQUEST
    assert refused.value.message.endswith(
        "rule EVENT_TIMES, the transform asks for RECORDED; call MigrateQuery first")


def test_a_checkpoint_written_before_the_rule_continues_under_event_times_only(engine_client, engine_root):
    chain = run(Chain(engine_client, engine_root.run / "rule-none", engine_root.data / "rule-none",
                      TransformSql(engine="spark", query=HOURLY), SCHEMAS), calls=1)
    assert chain.checkpoint is not None
    state_file = chain.checkpoint / "engine.json"
    state = json.loads(state_file.read_text())
    del state["watermark_rule"]  # as an engine before the rule wrote it
    state_file.write_text(json.dumps(state))
    result = chain.execute({JOINED: [SECOND]}, {JOINED: WATERMARKS[1]})
    assert result.late_rows > 0  # as under EVENT_TIMES: the watermark had run to 05:10


def test_migrate_moves_a_checkpoint_to_the_recorded_rule_keeping_state_and_watermarks(
        engine_client, engine_root):
    old = TransformSql(engine="spark", query=HOURLY)
    chain = run(Chain(engine_client, engine_root.run / "rule-migrate", engine_root.data / "rule-migrate",
                      old, SCHEMAS), calls=1)
    new = TransformSql(engine="spark", query=HOURLY, input_watermarks=InputWatermarks.RECORDED)
    migrated = engine_root.run / "rule-migrate" / "migrated"
    answer = engine_client.migrate(MigrateRequest(
        transaction_id="rule-migrate", dataset_id="com.example.derived", prev_transform=old,
        next_transform=new, prev_checkpoint_dir=chain.checkpoint, new_checkpoint_dir=migrated))
    assert answer.state_carried and "input watermarks now follow rule RECORDED" in answer.message
    chain.checkpoint, chain.transform = migrated, new
    # The kept watermark (05:10, reached under the old rule) never moves back: the hours before
    # it were closed by the first call and their new rows are late; the recorded 06:00 then
    # closes the 05:00 hour, holding a row of each call.
    result = chain.execute({JOINED: [SECOND]}, {JOINED: WATERMARKS[1]})
    assert result.output_watermark == WATERMARKS[1]
    assert [(r["event_time"], r["n"], r["total"]) for r in records(result.output_path)] == [
        (T0 + hours(6), 2, 5 + 105)]
