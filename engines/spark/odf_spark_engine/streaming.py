"""Validate, Execute and Migrate on Spark Structured Streaming.

An ODF derivative transform is a stream processor fed in bites: each Execute call brings the
input slices committed since the last call, and the result must not depend on how the input
was cut into slices or calls. Spark Structured Streaming gives exactly that when every call
resumes the same streaming query from its checkpoint:

- each input is a Parquet *file source* over a scratch folder holding links to this call's new
  slices only, so the source reads every slice once;
- ``withWatermark(event_time, 0 s)`` on every input, so windows close and join state is
  dropped only when the event-time watermark passes them;
- the user's SQL steps run over temp views named by dataset id (and step alias), each step
  checked by the SQL policy (policy.py) first;
- ``trigger(availableNow=True)`` processes everything new, then runs the no-data batch that
  emits what the advanced watermark closed, and stops;
- ``foreachBatch`` collects the emitted rows, written as one Parquet file sorted by event time.

Watermark markers. Spark derives watermarks only from rows it sees, and keeps just the global
watermark across restarts, not each input's. So every call adds to each input one *marker
row*: event time = that input's watermark (kept in engine.json), a hidden marker column set.
It passes ``withWatermark`` and is then filtered out before the user's query sees the view.
This feeds explicit watermarks (closing windows with no new data), restores each input's
watermark after a restart, and holds the global watermark back (marker at the epoch) while an
input has no watermark at all. No filter may run between the input and its watermark node,
or a marker (nulls in every data column) is lost with its watermark: the marker filter is an
optimizer barrier (see ``_input_frame``).

Where an input's watermark comes from is the transform's rule (``input_watermarks``, kept in
the checkpoint, see checkpoint.py). EVENT_TIMES, what transforms written before the rule
keep: the latest of its explicit watermarks and the event times seen, and ``withWatermark``
is on the event time column, so the rows move it too. RECORDED (ODF's rule): its explicit
watermarks alone, the ones its dataset recorded. Spark would still take the rows' event times,
so ``withWatermark`` is on a hidden column only the marker fills (``WATERMARK_COLUMN``; Spark
counts the data rows' null as the epoch, below any marker), and the event time column is given
the watermark's metadata above it: the operators keep evicting and dropping by it. A
derivative input's later rows (a time-bounded join's, held back by its bound) are then never
late downstream, as long as its recorded watermark does not pass them.

Chained stateful operators (a join then a window, a window then a window). Spark gives each
operator its own watermark, derived from the global one through the operators below it: a
stream-stream join holds rows for its time bound, so what it emits runs behind its input by
that bound. All operators evict in the same batch, so one no-data batch closes everything the
new watermark allows. The output watermark the engine reports follows the same derivation up
to the output (``_output_watermark``), so no later call emits a row behind it.

A step that needs no streaming state runs as one plain batch instead (``_planned``): without
temporal tables, a plan made of stateless operators alone (projections, filters, unions,
generators; no aggregation, join, deduplication, window, sort, limit or subquery) gives, for
every row, what the streaming query gives for it, since only a stateful operator drops a row as
late or holds one back; so the batch over this call's new slices emits the same rows, and the
output watermark is the one the streaming plan would derive (the least input watermark, never
moving back). It skips the micro-batch machinery (offsets and commits written to the
checkpoint, a no-data batch) that costs a stateless step most of its time; its checkpoint
carries the engine state forward and leaves Spark's untouched.

Temporal tables (temporal.py) are not streamed: each is a static view of its history. The
streamed inputs' rows wait in the checkpoint until every temporal table's watermark has
reached their event time, and their markers stand at most at that watermark, so nothing
downstream of a temporal join closes before the rows it may still get.

A stream-stream join without a time bound on both sides keeps a side's rows forever, so it
may emit a row of any event time in any later call (a new dimension row matches every old
event). Spark still passes its input watermark on; the engine does not: such a join holds
the output watermark where it is, and a stateful operator behind it in the same query (a
window, another join), which Spark would let drop the join's later rows as late, is refused
(``_plan_watermark``). Rows a stateful operator does drop as late (an input's rows behind its
watermark) are counted per call and reported (``late_rows``), never silent.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from . import checkpoint, temporal
from .errors import EngineFailure, Kind, query_failure, run_failure
from .generated import engine_pb2 as pb
from .policy import Policy, Step, _class, _scala

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# ODF watermarks are explicit, so Spark's watermark follows them with no extra delay.
WATERMARK_DELAY = "0 seconds"
MARKER_COLUMN = "__odf_watermark_marker"
# Under RECORDED: the input's watermark, set on its marker row only; the watermark node's column.
WATERMARK_COLUMN = "__odf_watermark"
SYSTEM_TIME_TYPE = pa.timestamp("us", tz="UTC")
# Spark's file source ignores files older than this relative to the newest one it has seen
# (default one week); slices of any age must be read.
MAX_FILE_AGE = "3650000d"
# Where each input's file source looks: one folder per input, emptied before every call. The
# path must be the same in every call and every engine process, because on restart Spark
# re-plans the last batch of the checkpoint and refuses files outside the source's folder;
# those files are gone by then, which spark.sql.files.ignoreMissingFiles lets it accept.
# Engines run with a private /tmp (sandbox, container), so the fixed path is theirs alone.
INPUTS_ROOT = Path(tempfile.gettempdir()) / "odf-engine-inputs"
# With a cluster master the executors run outside the engine's sandbox and cannot see its
# private /tmp: the runtime then names a shared folder, the same path inside and out.
SHARED_INPUTS_ENV = "ODF_ENGINE_INPUTS_ROOT"


def inputs_root(dataset_id: str) -> Path:
    """Where one transaction stages its inputs (stable per output dataset, see INPUTS_ROOT)."""
    shared = os.environ.get(SHARED_INPUTS_ENV)
    return Path(shared) / dataset_id if shared else INPUTS_ROOT


@dataclass
class StreamInput:
    """An input dataset prepared for a streaming query."""

    dataset_id: str
    event_time: str  # event time column name
    schema: pa.Schema  # schema of its data files
    folder: Path  # the folder its file source watches
    recorded: bool  # its watermark is its recorded watermarks alone (RECORDED), not its rows'

    @property
    def has_watermark(self) -> bool:
        return pa.types.is_timestamp(self.schema.field(self.event_time).type)


# ----- Validate ------------------------------------------------------------------------------


def validate(spark: SparkSession, request: pb.ValidateRequest) -> pb.OutputSchema:
    """Plans the query over empty inputs and starts it once, so streaming-only errors
    (an aggregation without a watermark, an unsupported join) surface too."""
    check_transform(request.transform)
    tables = temporal.Tables.of(request.transform, request.inputs)
    with tempfile.TemporaryDirectory(prefix="odf-validate-") as scratch:
        inputs = [_stream_input(i, Path(scratch) / "inputs", request.transform) for i in request.inputs
                  if i.dataset_id not in tables.keys]
        session = spark.newSession()
        views = {i.dataset_id: _empty_view(session, i) for i in request.inputs if i.dataset_id in tables.keys}
        output = build_query(session, inputs, request.transform, request.vocab, views, tables)
        # The join bounds Spark settles only in a batch's executed plan: where a stateful operator
        # sits behind a stream-stream join, a marker per input makes Spark run one (seconds, so
        # only then) and the plan is checked.
        check_plan = _stateful_behind_join(output._jdf.queryExecution().analyzed())
        for stream_input in inputs if check_plan else []:
            if stream_input.has_watermark:
                _write_marker(stream_input, EPOCH, "validate-marker.parquet")
        # The batch must be consumed whole: Spark checks that every state store committed.
        query = _start(output, Path(scratch) / "spark",
                       lambda df, batch_id: df.write.format("noop").mode("append").save())
        try:
            query.awaitTermination()
        except Exception as exc:
            raise run_failure(exc) from exc
        execution = query._jsq.streamingQuery().lastExecution()
        if check_plan and execution is not None:
            _plan_watermark(execution.executedPlan(), 0, session._jvm)
        return _output_schema(output)


_STATEFUL_LOGICAL = {"Aggregate", "Join", "Deduplicate", "DeduplicateWithinWatermark"}


def _stateful_behind_join(node, under_stateful: bool = False) -> bool:
    """Whether the analysed logical plan has a stream-stream join below a stateful operator."""
    name = node.nodeName()
    if name == "Join" and under_stateful and node.left().isStreaming() and node.right().isStreaming():
        return True
    children = node.children()
    below = under_stateful or name in _STATEFUL_LOGICAL
    return any(_stateful_behind_join(children.apply(i), below) for i in range(children.size()))


# ----- Execute -------------------------------------------------------------------------------


def execute(spark: SparkSession, request: pb.ExecuteRequest) -> Iterator[pb.ExecuteResponse]:
    """Runs one transaction; yields progress and logs, then the result.

    Raises EngineFailure; on failure the new checkpoint folder is left for the coordinator to
    discard."""
    check_transform(request.transform)
    if not request.HasField("system_time"):
        raise EngineFailure(Kind.INVALID_REQUEST, "system_time is required")
    if not request.output_data_path:
        raise EngineFailure(Kind.INVALID_REQUEST, "output_data_path is required")
    state = checkpoint.load_state(request.prev_checkpoint_dir, request.transform)
    new_dir = checkpoint.start_new(request.new_checkpoint_dir, request.prev_checkpoint_dir)
    state.transaction_id = request.transaction_id
    state.runs += 1

    staging = inputs_root(request.dataset_id)
    shutil.rmtree(staging, ignore_errors=True)
    tables = temporal.Tables.of(request.transform, request.inputs)
    session = spark.newSession()
    session.conf.set("spark.sql.files.ignoreMissingFiles", "true")  # see INPUTS_ROOT
    views, held = {}, None
    for message in request.inputs:  # temporal tables first: their watermarks hold the others
        if message.dataset_id in tables.keys:
            temporal.add_history(message, new_dir, state.runs)
            watermark = _input_watermark(message, state, "event_time")
            view = staging / "temporal" / f"{state.runs:08d}-{len(views)}.parquet"
            temporal.write_view(new_dir, message, tables.keys[message.dataset_id], view)
            views[message.dataset_id] = session.read.parquet(str(view))
            yield _log_input(message, watermark)
    if tables.keys:
        marks = [state.input_watermark(name) for name in tables.keys]
        held = _Held(None if None in marks else min(marks), new_dir)
    inputs = []
    for message in request.inputs:
        if message.dataset_id not in tables.keys:
            stream_input = _stream_input(message, staging, request.transform)
            watermark = _feed_input(stream_input, message, state, held)
            inputs.append(stream_input)
            yield _log_input(message, watermark, held)

    output, batch = _planned(session, inputs, request.transform, request.vocab, views, tables)
    batches: list[pa.Table] = []
    late = _LateRows()
    query = None
    if batch:
        yield pb.ExecuteResponse(progress=pb.Progress(stage="batch", batch_id=0))
        try:
            batches.append(output.toArrow())
        except Exception as exc:
            raise run_failure(exc) from exc
    else:
        query = _start(output, new_dir / checkpoint.SPARK_DIR, lambda df, _: batches.append(df.toArrow()))
        try:
            yield from _follow(query, late)
        except Exception as exc:
            raise run_failure(exc) from exc
        finally:
            if query.isActive:  # the client went away mid-stream
                query.stop()

    # Before anything is written: the plan check may refuse the query. Every input counts,
    # the temporal tables too (their watermarks hold the streamed rows back).
    watermark = _output_watermark([i.dataset_id for i in request.inputs], state, query, session)
    schema = _output_schema(output)
    yield pb.ExecuteResponse(progress=pb.Progress(stage="writing"))
    system_time = request.system_time.ToDatetime(tzinfo=UTC)
    num_records = _write_output(batches, schema, request.vocab, system_time, request.output_data_path)

    state.output_watermark = _text(watermark) if watermark else None
    shutil.rmtree(staging)
    checkpoint.save_state(new_dir, state)
    if late.rows:
        yield _log(f"{late.rows} row(s) arrived behind the watermark and were dropped", "WARN")

    result = pb.ExecuteResult(num_records=num_records, schema=schema, late_rows=late.rows,
                              pending_rows=_pending_rows(inputs, tables, state, held))
    if watermark is not None:
        result.output_watermark.FromDatetime(watermark)
    yield pb.ExecuteResponse(result=result)


@dataclass(frozen=True)
class _Held:
    """Streamed rows wait for the temporal tables: ``ready`` is the least of their watermarks
    (None while one has none); the rows past it stay in ``checkpoint``'s pending files."""

    ready: datetime | None
    checkpoint: Path


def _pending_rows(streamed: list[StreamInput], tables: temporal.Tables, state,
                  held: _Held | None) -> list[pb.PendingRows]:
    """The streamed inputs' rows left waiting in the new checkpoint for the temporal tables,
    and which tables hold them: those without a watermark, else those at the least one."""
    if held is None:
        return []
    marks = {name: state.input_watermark(name) for name in tables.keys}
    holding = sorted(n for n, w in marks.items() if w is None) or sorted(
        n for n, w in marks.items() if w == held.ready)
    found = []
    for stream_input in streamed:
        rows = temporal.pending_count(held.checkpoint, stream_input.dataset_id)
        if rows:
            message = pb.PendingRows(input=stream_input.dataset_id, rows=rows, waiting_for=holding)
            if held.ready is not None:
                message.watermark.FromDatetime(held.ready)
            found.append(message)
    return found


def _feed_input(
    stream_input: StreamInput, message: pb.ExecuteInput, state, held: _Held | None
) -> datetime | None:
    """Links the new slices into the input's folder (with temporal tables: its rows that are
    ready, pending and new), adds its marker row and updates its watermark in ``state``;
    returns the new input watermark."""
    stream_input.folder.mkdir(parents=True)
    for path in message.data_paths:
        if not os.path.isfile(path):
            raise EngineFailure(Kind.INVALID_REQUEST, f"input {message.dataset_id}: no data file {path}")
    watermark = _input_watermark(message, state, stream_input.event_time)
    marker = watermark
    if held is None:
        for k, path in enumerate(message.data_paths):
            # Unique names across the whole chain: Spark's file source skips paths it has seen.
            _link(Path(path), stream_input.folder / f"{state.runs:08d}-{k:06d}.parquet")
    else:
        _feed_ready(stream_input, message, held, f"{state.runs:08d}-ready.parquet")
        marker = None if held.ready is None or watermark is None else min(watermark, held.ready)
    if stream_input.has_watermark:
        _write_marker(stream_input, marker or EPOCH, f"{state.runs:08d}-marker.parquet")
    return watermark


def _input_watermark(message: pb.ExecuteInput, state, event_time: str) -> datetime | None:
    """The input's watermark after this call's explicit watermarks (and, under the EVENT_TIMES
    rule, its slices' event times), kept in ``state``."""
    event_time = message.vocab.event_time_column or event_time
    candidates = [state.input_watermark(message.dataset_id)]
    candidates += [w.event_time.ToDatetime(tzinfo=UTC) for w in message.explicit_watermarks]
    if not state.recorded_watermarks:
        candidates += [_max_event_time(path, event_time) for path in message.data_paths]
    known = [c for c in candidates if c is not None]
    watermark = max(known) if known else None
    if watermark is not None:
        state.input_watermarks[message.dataset_id] = _text(watermark)
    return watermark


def _feed_ready(stream_input: StreamInput, message: pb.ExecuteInput, held: _Held, name: str) -> None:
    """Splits the pending rows and the new slices at ``held.ready``: the ready ones go to the
    file source, the others replace the pending file (renamed over: the file it replaces is a
    hard link into the previous checkpoint)."""
    schema = stream_input.schema
    pending = temporal.pending_file(held.checkpoint, message.dataset_id)
    paths = ([str(pending)] if pending.is_file() else []) + list(message.data_paths)
    rows = [pq.read_table(p).select(schema.names).cast(schema) for p in paths]
    ready, waiting = temporal.split_ready(pa.concat_tables(rows) if rows else schema.empty_table(),
                                          stream_input.event_time, held.ready)
    if ready.num_rows:
        pq.write_table(ready, stream_input.folder / name)
    if waiting.num_rows or pending.is_file():
        pending.parent.mkdir(parents=True, exist_ok=True)
        partial = pending.with_name(pending.name + ".partial")
        pq.write_table(waiting, partial)
        os.replace(partial, pending)


def _link(source: Path, link: Path) -> None:
    """Inputs are read-only and often on another mount: hard link when possible, else symlink."""
    try:
        os.link(source, link)
    except OSError:
        os.symlink(source.resolve(), link)


def _max_event_time(path: str, column: str) -> datetime | None:
    value = pc.max(pq.read_table(path, columns=[column]).column(column)).as_py()
    if value is None or not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _write_marker(stream_input: StreamInput, event_time: datetime, name: str) -> None:
    schema = pa.schema([f.with_nullable(True) for f in stream_input.schema])
    columns = {f.name: pa.nulls(1, f.type) for f in schema}
    et_type = schema.field(stream_input.event_time).type
    value = pa.array([event_time if et_type.tz else event_time.replace(tzinfo=None)], et_type)
    if stream_input.recorded:
        columns[WATERMARK_COLUMN] = value
    else:
        columns[stream_input.event_time] = value
        columns[MARKER_COLUMN] = pa.array([True])
    pq.write_table(pa.table(columns), stream_input.folder / name)


@dataclass
class _LateRows:
    """Rows the stateful operators dropped as late in one call, summed over its batches. For a
    window Spark counts the groups each partition had summed before the drop, so a count can
    be below the input rows behind it (never above, never 0 when rows were dropped)."""

    rows: int = 0


def _follow(query, late: _LateRows) -> Iterator[pb.ExecuteResponse]:
    """Waits for the query to finish, reporting each micro-batch as it completes and summing
    the rows dropped as late into ``late``."""
    last_batch = -1
    while True:
        finished = query.awaitTermination(0.5)
        for progress in query.recentProgress:
            if progress.batchId > last_batch:
                last_batch = progress.batchId
                late.rows += sum(o.numRowsDroppedByWatermark for o in progress.stateOperators)
                yield pb.ExecuteResponse(
                    progress=pb.Progress(
                        stage="batch",
                        batch_id=last_batch,
                        input_rows=progress.numInputRows,
                        watermark=progress.eventTime.get("watermark", ""),
                    )
                )
        if finished:
            return


def _write_output(batches, schema: pb.OutputSchema, vocab, system_time, path: str) -> int:
    """Writes the collected rows as one Parquet file: system_time, event_time, data columns,
    ordered by event time (then by the other columns, so re-runs give the same bytes)."""
    arrow_schema = pa.ipc.read_schema(pa.py_buffer(schema.arrow_schema))
    data_schema = pa.schema(list(arrow_schema)[1:])
    rows = [b.select(data_schema.names).cast(data_schema) for b in batches if b.num_rows]
    if not rows:
        return 0
    table = pa.concat_tables(rows)
    stamp = pa.repeat(pa.scalar(system_time, SYSTEM_TIME_TYPE), table.num_rows)
    table = table.add_column(0, arrow_schema.field(0), stamp)
    table = table.sort_by([(name, "ascending") for name in _sort_keys(table.schema)])
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    pq.write_table(table, partial)
    os.replace(partial, target)
    return table.num_rows


def _sort_keys(schema: pa.Schema) -> list[str]:
    sortable = (
        pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal, pa.types.is_temporal,
        pa.types.is_string, pa.types.is_large_string, pa.types.is_boolean, pa.types.is_binary,
    )
    return [f.name for f in list(schema)[1:] if any(test(f.type) for test in sortable)]


def _output_watermark(inputs: list[str], state, query, session: SparkSession) -> datetime | None:
    """The event-time watermark of the query's output after the run: no later call emits a row
    behind it. Unknown while an input has no watermark; never moves back. ``query``: the
    streaming query run, None for a step run as a batch (a stateless plan passes the least
    input watermark on unchanged).

    With every input's watermark fed in as a marker and no delay, Spark's global watermark is
    the minimum of the input watermarks. That is also the output's watermark only when no
    stateful operator holds rows back: a stream-stream join keeps each side's rows until the
    watermark passes them plus the join's time bound, and may still emit them (matched, or
    null-padded by an outer join), so its output runs behind its input by that bound. Spark
    works this out for each operator when it evicts state (``produceOutputWatermark``);
    ``_plan_watermark`` applies the same rule up the executed plan to the output, except for a
    join that keeps a side's rows forever: that holds the output watermark where it is."""
    input_watermarks = [state.input_watermark(name) for name in inputs]
    watermark = None if None in input_watermarks or not inputs else min(input_watermarks)
    # Spark's private API: the engine pins its Spark version, and the tests of chained stateful
    # operators fail if this changes. No batch ran only when no input has a Spark watermark
    # (DATE event times get no marker), and then no operator can hold rows back by time either.
    execution = query._jsq.streamingQuery().lastExecution() if query is not None else None
    if watermark is not None and execution is not None:
        global_ms = _millis(watermark)
        output_ms = _plan_watermark(execution.executedPlan(), global_ms, session._jvm)
        if output_ms == HELD:
            watermark = None
        elif output_ms is not None:  # None: no input of the plan has a Spark watermark
            watermark -= timedelta(milliseconds=global_ms - output_ms)
    previous = state.output_watermark_time
    if previous is not None and (watermark is None or watermark < previous):
        return previous
    return watermark


_WATERMARK_NODE = "org.apache.spark.sql.execution.streaming.operators.stateful.EventTimeWatermarkExec"
_STATEFUL_NODE = "org.apache.spark.sql.execution.streaming.operators.stateful.StateStoreWriter"
_JOIN_NODE = "org.apache.spark.sql.execution.streaming.operators.stateful.join.StreamingSymmetricHashJoinExec"
# The watermark of what a join that keeps a side's rows forever emits: below every event time.
HELD = -(2**63)
_OPERATOR_NAMES = {"stateStoreSave": "window or aggregation", "symmetricHashJoin": "stream-stream join"}


def _plan_watermark(node, watermark_ms: int, jvm) -> int | None:
    """The watermark (ms) of ``node``'s output when the global watermark is ``watermark_ms``,
    following Spark's own propagation (WatermarkPropagator): a watermark node emits the global
    watermark, a stateful operator turns the least of its inputs' into its output watermark,
    any other node passes the least of its inputs' on. None when no input has a watermark.

    Where Spark is wrong, the engine is not: a stream-stream join that keeps a side's rows
    forever (no time bound for it) gives HELD, not its input watermark; a stateful operator
    behind one is refused (EngineFailure), since Spark would drop that join's later rows."""
    children = node.children()
    below = [_plan_watermark(children.apply(i), watermark_ms, jvm) for i in range(children.size())]
    inputs = [w for w in below if w is not None]
    if _is(jvm, _WATERMARK_NODE, node):
        return watermark_ms
    if not inputs:
        return None
    if _is(jvm, _STATEFUL_NODE, node):
        unbounded_join = _is(jvm, _JOIN_NODE, node) and _keeps_rows_forever(node)
        if min(inputs) == HELD and not unbounded_join:
            name = _OPERATOR_NAMES.get(node.shortName(), f"stateful operator ({node.shortName()})")
            raise EngineFailure(
                Kind.UNSUPPORTED,
                f"a {name} behind a stream-stream join with no time bound would drop as late the rows "
                "that join emits when a row arrives for an old key; bound the join in event time on "
                "both sides (s.event_time BETWEEN e.event_time - INTERVAL 1 DAY AND e.event_time) or "
                "join the reference data as a temporal table (temporalTables)",
            )
        if unbounded_join:
            return HELD
        produced = node.produceOutputWatermark(min(inputs))
        return produced.get() if produced.isDefined() else None
    return min(inputs)


def _keeps_rows_forever(join) -> bool:
    """Whether a stream-stream join never evicts one side's rows: it has no state cleanup for
    it, because no condition bounds that side's event time by the other's."""
    predicates = join.stateWatermarkPredicates()
    return not (predicates.left().isDefined() and predicates.right().isDefined())


def _is(jvm, class_name: str, node) -> bool:
    return jvm.java.lang.Class.forName(class_name).isInstance(node)


def _millis(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(milliseconds=1)


# ----- Migrate -------------------------------------------------------------------------------


def migrate(request: pb.MigrateRequest) -> pb.MigrateResult:
    """Carries the state over when the query is unchanged; otherwise the next query starts with
    empty streaming state but keeps the input and output watermarks, so it neither re-reads
    old input nor emits behind the output watermark. A new input watermark rule starts from
    the watermarks kept, which never move back: from then on only the rule moves them."""
    check_transform(request.next_transform)
    state = checkpoint.load_state(request.prev_checkpoint_dir, request.prev_transform)
    unchanged = checkpoint.query_fingerprint(request.prev_transform) == checkpoint.query_fingerprint(
        request.next_transform
    )
    new_dir = checkpoint.start_new(
        request.new_checkpoint_dir, request.prev_checkpoint_dir, copy_spark_state=unchanged
    )
    state.transaction_id = request.transaction_id
    state.query_fingerprint = checkpoint.query_fingerprint(request.next_transform)
    rule = checkpoint.rule_name(request.next_transform.input_watermarks)
    new_rule = f"; input watermarks now follow rule {rule}" if rule != state.watermark_rule else ""
    state.watermark_rule = rule
    checkpoint.save_state(new_dir, state)
    if not request.prev_checkpoint_dir:
        return pb.MigrateResult(state_carried=False, message="no previous checkpoint")
    if unchanged:
        return pb.MigrateResult(state_carried=True, message=f"query unchanged; state carried over{new_rule}")
    return pb.MigrateResult(
        state_carried=False,
        message=(
            "the new query starts with empty streaming state: windows and join buffers still "
            f"open under the previous query are dropped; input and output watermarks are kept{new_rule}"
        ),
    )


# ----- the streaming query -------------------------------------------------------------------


# The analysed plan's operators that keep no state across rows in a streaming query (class
# names): a plan of these alone, none holding a subquery, runs as a batch (``_planned``).
STATELESS_OPERATORS = {
    "Project", "Filter", "SubqueryAlias", "View", "Union", "Generate", "LogicalRelation",
    "WithCTE", "CTERelationDef", "CTERelationRef", "OneRowRelation", "LocalRelation",
}


def _planned(
    session: SparkSession, inputs: list[StreamInput], transform: pb.Transform, vocab: pb.Vocabulary,
    views: dict[str, DataFrame], tables: temporal.Tables,
) -> tuple[DataFrame, bool]:
    """The query over this call's inputs, and whether it runs as one batch (see the module
    doc): planned over batch frames first when there is no temporal table, kept if stateless;
    else (or with a temporal table) planned again as the streaming query."""
    if not tables.keys:
        output = build_query(session, inputs, transform, vocab, views, tables, batch=True)
        if _stateless(output._jdf.queryExecution().analyzed()):
            return output, True
    return build_query(session, inputs, transform, vocab, views, tables), False


def _stateless(node) -> bool:
    """Whether an analysed plan is made of ``STATELESS_OPERATORS`` alone, with no subquery."""
    return (_class(node) in STATELESS_OPERATORS and node.subqueries().isEmpty()
            and all(_stateless(child) for child in _scala(node.children())))


def build_query(
    session: SparkSession, inputs: list[StreamInput], transform: pb.Transform, vocab: pb.Vocabulary,
    views: dict[str, DataFrame], tables: temporal.Tables, *, batch: bool = False,
) -> DataFrame:
    """Registers the inputs (streamed, or with ``batch`` read as a batch, and the temporal
    ``views``) and the aliased steps as views; returns the output step's result with the event
    time column first and no system_time column."""
    frames = {i.dataset_id: _input_frame(session, i, batch=batch) for i in inputs}
    output = run_steps(session, {**frames, **views}, transform, tables)
    event_time = vocab.event_time_column or "event_time"
    system_time = vocab.system_time_column or "system_time"
    if event_time not in output.columns:
        raise EngineFailure(
            Kind.INVALID_QUERY,
            f"the query result has no column `{event_time}` (the output event time column); "
            f"it has: {', '.join(output.columns)}",
        )
    data = [c for c in output.columns if c not in (event_time, system_time)]
    return output.select(event_time, *data)


def run_steps(
    session: SparkSession, inputs: dict[str, DataFrame], transform: pb.Transform, tables: temporal.Tables
) -> DataFrame:
    """Registers the inputs as views (by name; a temporal table by its private view name) and
    plans the query steps over them, each one's temporal joins rewritten (temporal.py) and
    then checked by the SQL policy (policy.py) before and after Spark analyses it; returns the
    output step's frame (each aliased step becomes a view for the later ones), without the
    temporal views' hidden columns."""
    views = {tables.view(name): frame for name, frame in inputs.items()}
    for name, frame in views.items():
        frame.createOrReplaceTempView(quote(name))
    policy = Policy(session, views, tables)
    output_step = _output_step(transform)
    output = None
    for index, step in enumerate(transform.queries):
        where = Step(index, step.alias)
        rewritten = temporal.Rewritten(step.query)
        try:
            rewritten = temporal.rewrite(session, step.query, tables, where)
            policy.check_statement(rewritten.sql, where)
            frame = session.sql(rewritten.sql).drop(*temporal.HIDDEN)
        except EngineFailure:
            raise
        except Exception as exc:
            raise query_failure(exc, index, step.alias, step.query, rewritten.user_offset) from exc
        policy.check_plan(frame, where)
        if index == output_step:
            output = frame
        else:
            frame.createOrReplaceTempView(quote(step.alias))
            policy.add_step(step.alias)
    return output


def _input_frame(session: SparkSession, stream_input: StreamInput, *, batch: bool = False) -> DataFrame:
    """The input's stream with its watermark node (on the event time, or under RECORDED on the
    marker's hidden column) and without the marker rows; with ``batch``, the same over a batch
    read of its folder (Spark drops a batch's watermark node)."""
    hidden = _hidden_column(stream_input)
    schema = from_arrow_schema(stream_input.schema.append(hidden))
    stream_input.folder.mkdir(parents=True, exist_ok=True)
    if batch:
        frame = session.read.schema(schema).parquet(str(stream_input.folder))
    else:
        frame = session.readStream.schema(schema).option("maxFileAge", MAX_FILE_AGE).parquet(
            str(stream_input.folder))
    if not stream_input.has_watermark:  # a DATE event time: Spark watermarks need timestamps
        return frame.drop(hidden.name)
    event_time = F.col(stream_input.event_time)
    # The marker test must name the watermark node's column: Spark pushes any other
    # deterministic filter below that node, and the marker would be lost with its watermark.
    frame = frame.withWatermark(
        hidden.name if stream_input.recorded else stream_input.event_time, WATERMARK_DELAY)
    if stream_input.recorded:  # (a row without an event time is dropped above the barrier)
        is_marker = F.col(hidden.name).isNotNull()
    else:
        is_marker = F.coalesce(F.col(MARKER_COLUMN), event_time.isNull())
    # The non-deterministic term is an optimizer barrier: Spark pushes deterministic filters
    # that do not mention the event time below the watermark node, where they would drop the
    # marker rows (nulls in every data column) before the watermark sees them - the user's
    # WHERE clauses and the IS NOT NULL filters Spark infers from join keys alike. It neither
    # merges filters with a non-deterministic one nor pushes them through it.
    barrier = F.spark_partition_id() >= 0
    frame = frame.filter(~is_marker & barrier)
    if stream_input.recorded:
        # Spark's windows and joins evict and drop by the column that carries the watermark
        # node's metadata: the event time takes it over from the hidden column.
        watermarked = event_time.alias(stream_input.event_time, metadata=frame.schema[hidden.name].metadata)
        frame = frame.filter(event_time.isNotNull()).withColumn(stream_input.event_time, watermarked)
    return frame.drop(hidden.name)


def _hidden_column(stream_input: StreamInput) -> pa.Field:
    """The column only marker rows fill: a flag, or under RECORDED the input's watermark."""
    if stream_input.recorded:
        return pa.field(WATERMARK_COLUMN, stream_input.schema.field(stream_input.event_time).type)
    return pa.field(MARKER_COLUMN, pa.bool_())


def _start(output: DataFrame, spark_checkpoint: Path, on_batch):
    try:
        return (
            output.writeStream.foreachBatch(on_batch)
            .trigger(availableNow=True)
            .option("checkpointLocation", str(spark_checkpoint))
            .start()
        )
    except Exception as exc:
        raise run_failure(exc) from exc


def _output_schema(output: DataFrame) -> pb.OutputSchema:
    data = to_arrow_schema(output.schema, timezone="UTC")
    schema = data.insert(0, pa.field("system_time", SYSTEM_TIME_TYPE))
    # Spark's own DDL rendering (JVM side; PySpark has no public equivalent).
    ddl = "system_time TIMESTAMP," + output._jdf.schema().toDDL()
    return pb.OutputSchema(arrow_schema=schema.serialize().to_pybytes(), ddl=ddl)


# ----- small helpers -------------------------------------------------------------------------


def _stream_input(message, inputs_dir: Path, transform: pb.Transform) -> StreamInput:
    schema = pa.ipc.read_schema(pa.py_buffer(message.arrow_schema))
    event_time = message.vocab.event_time_column or "event_time"
    if event_time not in schema.names:
        raise EngineFailure(
            Kind.INVALID_REQUEST, f"input {message.dataset_id} has no event time column {event_time}"
        )
    folder = inputs_dir / "".join(c if c.isalnum() or c in "._-" else "_" for c in message.dataset_id)
    recorded = transform.input_watermarks == pb.Transform.RECORDED
    return StreamInput(message.dataset_id, event_time, schema, folder, recorded)


def check_transform(transform: pb.Transform) -> None:
    if not transform.queries:
        raise EngineFailure(Kind.INVALID_REQUEST, "the transform has no query")
    if sum(1 for step in transform.queries if not step.alias) > 1:
        raise EngineFailure(Kind.INVALID_QUERY, "only one query step may have no alias (the output)")


def _output_step(transform: pb.Transform) -> int:
    unaliased = [i for i, step in enumerate(transform.queries) if not step.alias]
    return unaliased[0] if unaliased else len(transform.queries) - 1


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _text(moment: datetime | None) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else "none"


def _empty_view(session: SparkSession, message) -> DataFrame:
    """A temporal table's view with no rows, for planning over schemas alone."""
    schema = temporal.view_schema(pa.ipc.read_schema(pa.py_buffer(message.arrow_schema)))
    return session.createDataFrame([], from_arrow_schema(schema))


def _log_input(message: pb.ExecuteInput, watermark: datetime | None, held: _Held | None = None):
    waits = f", rows after {_text(held.ready)} wait for the temporal tables" if held else ""
    return _log(
        f"input {message.dataset_id}: {len(message.data_paths)} new slice(s), "
        f"{len(message.explicit_watermarks)} explicit watermark(s), "
        f"watermark {_text(watermark)}, interval {message.system_time_interval or '()'}{waits}"
    )


def _log(message: str, level: str = "INFO") -> pb.ExecuteResponse:
    return pb.ExecuteResponse(log=pb.LogLine(level=level, message=message))
