"""A current-ODF (0.39) derivative: the batch step read from the chains, one engine step, the
``ExecuteTransform`` that records it (``schemas/ODF-039.md``, "Derivatives").

The engine call is the 0.18 one (``transform.execute.execute_step``); what differs is read and
written here (a service over both: ``store`` reads 0.18 builds to upgrade them, so the
transform layer does not import it):

- Where a step continues in an input is what the derivative's newest ``ExecuteTransform``
  recorded for it (``newBlockHash``/``newOffset``, or the ``prev`` ones where that step did not
  advance it; from the start when none did). The new part is the input's blocks after that
  block up to its head (``until`` in a replay): the slices with offsets after the recorded one,
  and the watermarks those blocks set (0.39 has no SetWatermark: an input's watermark is its
  newest ``AddData``/``ExecuteTransform`` ``newWatermark``). The engine gets them as explicit
  watermarks under ODF's rule (``inputWatermarks: recorded``).
- The engine reads an input's slices as stored (offset, op, system_time, event time, data),
  as the view named by the input's alias. Each file is checked against its block (size, then
  SHA3-256) before anything reads it. The previous checkpoint is a file checked the same way,
  then unpacked into the step's scratch folder (``store.checkpoint``).
- Retractions and corrections. An input *can hold* them when its chain says so
  (``retraction_origin``: a root whose merge in force is snapshot, changelogStream or
  upsertStream; a derivative with such an input) or its new data holds op != 0 (whatever made
  it). Deciding by the chain picks a step's way on the root's first pull, before any
  retraction arrives, rather than on the day one does. Before anything runs, a step with such
  an input asks the engine for the query's ``RowMapping`` (``step_mode``), and takes one of
  two ways (``StepMode``):
  - PASS_ON: projections, filters and aliases over that input whose output copies its op and
    its offset unchanged run incrementally in Execute, each record passed on as it comes.
    Offset is required because the engine orders its output by event time: without the
    input's offsets the order of a record and its retraction, or of the two halves of a
    correction, is lost.
  - RECOMPUTE: any other query (aggregates, windows, DISTINCT, joins, unions, ORDER BY ...
    LIMIT, subqueries, chains of them) runs once as a batch over the rows each input's change
    log describes up to the step (``held_rows``: a file per input, its view),
    and the step writes the records that take the rows the derivative's own change log
    describes to the query's answer (``row_changes.changes``: appends and retractions; a
    row of an aggregation whose group stays while its values change, a correct-from /
    correct-to pair, by the key columns the engine names). A block recorded before steps
    wrote pairs replays as written then (``_unpaired``). So
    after every step the derivative's rows are its query over its inputs' rows, whatever
    arrived late, changed or went away; no row waits for a watermark and none is dropped as
    late. Such a step keeps no checkpoint, and a derivative that took it once takes it from
    then on (its last step names no checkpoint). It costs the inputs' whole history each
    step (read and folded by DuckDB from the files: memory follows the rows held); a temporal
    table is given as its whole history of versions (``InputStep.versions``), which the
    engine's batch reads as of each event's time as Execute does.
  Late rows over inputs that only append (``lateRows: correct``, what ``coord add`` gives a
  new derivative, kept beside the chain: ``store.late_rows``): an APPEND_ONLY step whose
  engine dropped rows as late, or whose query holds rows back with no time bound (a join with
  none: its output watermark stays unknown while every input has one), is thrown away and run
  as RECOMPUTE, so the late rows correct the windows they belong to and a reader of the join
  gets a watermark (``_why_recompute``); so is one whose temporal table got versions dated
  behind its watermark, which events already joined should have met (``_late_versions``,
  before anything streams). The chain says which steps were recomputed (no
  ``newCheckpoint``): a replay and the invariance check go by it (``CurrentPlan.recompute``),
  never by the policy. A query Spark cannot stream (an aggregate without a window: Execute
  answers INVALID_QUERY) is recomputed the same way, when the batch takes it.
  In either way the filters and the output's columns may read the event time and the data
  columns, never op, offset or system_time (``RetractionsRefused``): a retraction carries the
  values of the record it retracts (its event time too), so a filter on values keeps both or
  neither and a column computed from values is the same in both; from the system columns
  they would differ, and the rows a change log describes have none.
- The engine's output (event time, data, an ``op`` column it carries) is the new slice through
  ``odf_slice.build_slice``: offsets after the dataset's last, the block's system time. A
  query that passes retractions on has its output put in the input's order first
  (``in_input_order``: by the input offset it carries) and each lone half of a correction the
  filter cut made whole for a consumer (a correct-from alone a retraction, a correct-to alone
  an append); the slice is then stored in the canonical order as every slice is. An input's
  ``offset`` and ``system_time`` the query carried (``SELECT *``) are not the output's and are
  dropped.
  A ``SetDataSchema`` goes before the first data, and before data that adds optional
  columns; an output that drops or changes a column is refused (``metadata.schema_evolution``).
- A step with nothing new in any input (no slice, no watermark move) runs nothing and commits
  nothing. The output watermark never goes back (the chain rules refuse it).
- Field lineage, which a 0.39 block has no place for, is derived at each step and kept beside
  the chain when it starts a version (``store.field_lineage``); a replay derives it again for
  each block that has one and compares, as for 0.18.
- Exactly once as for 0.18: the engine writes into a scratch folder; the append path moves the
  slice and the packed checkpoint into the dataset with the block, the head last.
"""
from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..data.odf_schema import data_schema, grown_schema
from ..data.odf_slice import Op, Vocabulary, build_slice, write_slice
from ..engine.port import (
    Engine,
    EngineError,
    EngineErrorKind,
    EngineProgress,
    ExecuteInput,
    ExecuteResult,
    InputSchema,
    LineageRequest,
    PendingRows,
    PreprocessRequest,
    RowMappingRequest,
)
from ..errors import Conflict, CoordError, Invalid
from ..metadata.multiformats import Multihash
from ..metadata.objects import (
    DatasetVocabulary,
    FieldLineage,
    FieldSource,
    InputWatermarks,
    LateRows,
    TransformSql,
)
from ..metadata.odf39.adapt import transform_sql
from ..metadata.odf39.events import (
    AddData,
    Checkpoint,
    DataSlice,
    ExecuteTransform,
    ExecuteTransformInput,
    SetDataSchema,
    SetTransform,
    TransformInput,
)
from ..metadata.odf39.source import (
    MergeStrategyChangelogStream,
    MergeStrategySnapshot,
    MergeStrategyUpsertStream,
)
from ..metadata.schema_evolution import SchemaChangeRefused
from ..metadata.timestamps import now_utc
from ..store.append import checkpoint_of, data_slice_of
from ..store.checked import checked_current_files, checked_current_scan
from ..store.checkpoint import pack_checkpoint, unpack_checkpoint
from ..store.dataset import CurrentDataset
from ..store.field_lineage import record_version, recorded_versions
from ..store.late_rows import late_rows_policy
from ..store.overview import CurrentDatasets, InputNotFound
from ..store.read import DatasetState, SliceRecord, StoredBlock, build
from ..store.verify import vocabulary_of
from ..transform.builds import late_rows_words
from ..transform.execute import EngineStep, LateRowsRefused, TransformResult, execute_step
from ..transform.record_lineage import lineage_difference, lineage_of
from ..trust.verify import Problem
from ..workspace import Workspace
from ..workspace.crash import crash_point
from .pending_rows import pending_words, record_pending


class InputRefused(CoordError):
    """An input whose data this step cannot read: changed under the derivative, damaged, or
    holding what the derivative's query cannot handle."""


class RetractionsRefused(InputRefused):
    """An input that can hold retractions or corrections, read by a query that cannot take
    them (it filters on or computes from the system columns, or carries op without offset, or
    reads it as a temporal table)."""


class StepMode(enum.Enum):
    """How a step runs (the module's docstring, "Retractions and corrections")."""

    APPEND_ONLY = "append-only"  # no input can hold retractions: Execute, incrementally
    PASS_ON = "pass-on"  # row by row over an input that can: Execute, its op and offset carried
    RECOMPUTE = "recompute"  # the query over the inputs' rows, the difference written


# The merges whose roots retract and correct records, as the README names them.
RETRACTING_MERGES = {MergeStrategySnapshot: "snapshot", MergeStrategyChangelogStream: "changelogStream",
                     MergeStrategyUpsertStream: "upsertStream"}


def retraction_origin(datasets: CurrentDatasets, state: DatasetState) -> str | None:
    """Why the dataset whose chain is ``state`` can hold retractions or corrections: a root's
    merge in force, or (a derivative) an input that can, whose records it passes on or is
    refused; None: it only appends (an input the workspace does not hold counts as one, the
    data check of ``InputStep.retracting`` stands for it)."""
    for source in (state.polling_source, *state.push_sources):
        if source is not None and type(source.merge) in RETRACTING_MERGES:
            return f"its {RETRACTING_MERGES[type(source.merge)]} merge"
    for given in state.transform.inputs if state.transform else ():
        try:
            ds = datasets.input_dataset(given, str(state.id))
        except InputNotFound:
            continue
        if retraction_origin(datasets, datasets.state(ds.id)) is not None:
            return f"it passes on those of {ds.id}"
    return None


@dataclass(frozen=True)
class InputStep:
    """One input's new part for a step: blocks ``(prev_block, until]``, offsets after
    ``prev_offset``."""

    dataset: CurrentDataset
    alias: str  # the query's name for it
    state: DatasetState  # the input's chain up to ``until``
    prev_block: Multihash | None  # where the last step ended (None: the start)
    prev_offset: int | None
    slices: tuple[SliceRecord, ...]  # the new slices, oldest first
    watermarks: tuple[tuple[datetime, datetime], ...]  # (system time, watermark) of new blocks
    watermark_moved: bool
    origin: str | None  # why it can hold retractions or corrections (``retraction_origin``)
    prev_watermark: datetime | None = None  # its watermark where the last step ended

    def behind_watermark(self) -> int:
        """How many of the new versions (appends and correct-tos; a retraction is dated when it
        took effect, a correct-from is the version before) have an event time behind the
        watermark where the last step ended: versions of a temporal table that change what
        events already joined should have met."""
        if self.prev_watermark is None:
            return 0
        v, n = self.vocab, 0
        for path in self.data_paths():
            table = pq.read_table(path, columns=[v.event_time, v.operation_type])
            op, times = table[v.operation_type], table[v.event_time]
            version = pc.is_in(op, pa.array([Op.APPEND, Op.CORRECT_TO], op.type))
            late = pc.and_(pc.less(times, pa.scalar(self.prev_watermark, times.type)), version)
            n += pc.sum(pc.cast(late, pa.int64())).as_py() or 0
        return n

    @property
    def vocab(self) -> Vocabulary:
        return vocabulary_of(self.state.vocab)

    @property
    def has_news(self) -> bool:
        return bool(self.slices) or self.watermark_moved

    def query_input(self) -> ExecuteTransformInput:
        """What the block records of this input: the interval it read, if it moved."""
        head = self.state.head
        return ExecuteTransformInput(
            dataset_id=self.state.id, prev_block_hash=self.prev_block,
            new_block_hash=head if head != self.prev_block else None,
            prev_offset=self.prev_offset,
            new_offset=self.slices[-1].slice.offset_interval.end if self.slices else None)

    def data_paths(self) -> list[Path]:
        """The new slices' files, each checked against its block (``ChangedSlice``; once per
        file state, as every reader of slices checks them)."""
        return checked_current_files(self.dataset, self.slices)

    @cached_property  # read once a step: the mode and the temporal tables both ask
    def retracting(self) -> str | None:
        """Why this step's part of the input may hold retractions or corrections: its origin,
        else new data that holds some (op != 0: a dataset whose chain does not say it can, a
        derivative that wrote op itself); None: appends only."""
        if self.origin is not None:
            return self.origin
        op = self.vocab.operation_type
        for r, path in zip(self.slices, self.data_paths(), strict=True):
            if pc.any(pc.not_equal(pq.read_table(path, columns=[op])[op], 0)).as_py():
                return f"block {r.sequence_number} holds op != 0"
        return None

    def as_temporal_table(self, scratch: Path) -> ExecuteInput:
        """The input as a temporal table's new history (the engine's versions, temporal.py):
        a retraction ends its key's version at its block's watermark, the time the removal
        took effect (``query.state``: the record repeats the removed one's event time); a
        correct-from is left out, its correct-to being the version after it. Copies of the
        slices in ``scratch``; the records' values are unchanged."""
        given = self.execute_input()
        scratch.mkdir(parents=True, exist_ok=True)
        paths = []
        for r, path in zip(self.slices, self.data_paths(), strict=True):
            paths.append(scratch / f"versions-{r.slice.physical_hash}.parquet")
            pq.write_table(self._as_versions(r, pq.read_table(path)), paths[-1])
        return replace(given, data_paths=paths, removal=self._removal)

    def versions(self, target: Path) -> ExecuteInput:
        """The input's whole history up to the step as a temporal table's versions (as
        ``as_temporal_table`` makes them), in one file ``target``: what a recomputed step's
        temporal join reads."""
        files = checked_current_files(self.dataset, self.state.slices)
        pq.write_table(pa.concat_tables([self._as_versions(r, pq.read_table(f))
                                         for r, f in zip(self.state.slices, files, strict=True)],
                                        promote_options="permissive"), target)
        return ExecuteInput(dataset_id=self.alias, vocab=engine_vocab(self.vocab),
                            schema=pq.read_schema(target), data_paths=[target], removal=self._removal)

    @property
    def _removal(self) -> tuple[str, str]:
        return self.vocab.operation_type, str(int(Op.RETRACT))

    def _as_versions(self, r: SliceRecord, table: pa.Table) -> pa.Table:
        """The records of slice ``r`` as versions: correct-froms left out, retractions dated
        at their block's watermark."""
        v = self.vocab
        table = table.filter(pc.not_equal(table[v.operation_type], Op.CORRECT_FROM))
        at = self._effective.get(r.sequence_number)
        if at is not None:
            times = table[v.event_time]
            column = table.schema.get_field_index(v.event_time)
            removed = pc.equal(table[v.operation_type], Op.RETRACT)
            table = table.set_column(column, table.schema.field(column),
                                     pc.if_else(removed, pa.scalar(at, times.type), times))
        return table

    @cached_property
    def _effective(self) -> dict[int, datetime | None]:
        """When each data block's records took effect: its watermark, by sequence number."""
        return {b.block.sequence_number: b.block.event.new_watermark for b in self.state.blocks
                if isinstance(b.block.event, AddData | ExecuteTransform)}

    def schema(self) -> pa.Schema | None:
        """The schema of the input's newest slice (None: it has no data yet)."""
        newest = checked_current_files(self.dataset, self.state.slices[-1:])
        return pq.read_schema(newest[0]) if newest else None

    def execute_input(self) -> ExecuteInput:
        """The input as the engine port takes it (its files checked here): the new slices'
        rows, a compacted file whole where it holds nothing else (``checked_current_scan``)."""
        paths = checked_current_scan(self.dataset, self.slices)
        # the newest slice is in the last file when there are new ones (checked just now)
        schema = pq.read_schema(paths[-1]) if paths else self.schema()
        assert schema is not None, "planned only once every input has data"
        return ExecuteInput(
            dataset_id=self.alias,
            vocab=engine_vocab(self.vocab), schema=schema, data_paths=paths,
            explicit_watermarks=list(self.watermarks), system_time_interval="()")


def engine_vocab(v: Vocabulary) -> DatasetVocabulary:
    """A 0.39 vocabulary as the engine port takes it (its offset and op are data to the engine)."""
    return DatasetVocabulary(system_time_column=v.system_time, event_time_column=v.event_time)


def plan_input(datasets: CurrentDatasets, ds: CurrentDataset, alias: str, state: DatasetState,
               last: ExecuteTransformInput | None, until: Multihash | None = None, *,
               replaying: bool = False) -> InputStep:
    """The new part of input ``ds`` after ``last`` (what the previous step recorded of it) up to
    block ``until`` (None: its head; with ``replaying``, the step read nothing of it)."""
    index = {stored.hash: k for k, stored in enumerate(state.blocks)}
    prev_block = (last.new_block_hash or last.prev_block_hash) if last else None
    prev_offset = None
    if last is not None:
        prev_offset = last.new_offset if last.new_offset is not None else last.prev_offset
    start = 0 if prev_block is None else index.get(prev_block, -1) + 1
    if prev_block is not None and start == 0:
        raise InputRefused(f"input {ds.id} no longer holds block {prev_block}, which the "
                           "derivative read; its chain was replaced since")
    if until is None:
        end = start if replaying else len(state.blocks)
    else:
        end = index.get(until, -1) + 1
        if end == 0 or end < start:
            raise InputRefused(f"input {ds.id}: block {until}, where the step ended in it, is not "
                               f"after block {prev_block} in its chain; its chain was replaced since")
    if end == 0:
        raise InputRefused(f"input {ds.id}: the step read none of its blocks; coord replays a "
                           "step once every input it reads has blocks")
    state = up_to(state, end)
    new = [r for r in state.slices if r.sequence_number >= start]
    expected = 0 if prev_offset is None else prev_offset + 1
    if new and new[0].slice.offset_interval.start != expected:
        raise InputRefused(f"input {ds.id}: its data after block {prev_block} starts at offset "
                           f"{new[0].slice.offset_interval.start}, the derivative read up to "
                           f"{prev_offset}; its chain was replaced since")
    before = _watermark(state, start)
    watermarks = tuple((b.block.system_time, b.block.event.new_watermark)
                       for b in state.blocks[start:]
                       if isinstance(b.block.event, AddData | ExecuteTransform)
                       and b.block.event.new_watermark is not None)
    moved = state.watermark is not None and state.watermark != before
    return InputStep(ds, alias, state, prev_block, prev_offset, tuple(new), watermarks, moved,
                     retraction_origin(datasets, state), before)


def up_to(state: DatasetState, end: int) -> DatasetState:
    """``state`` as of its first ``end`` blocks (what a replay's input, or the derivative
    before a replayed step, held then: its schema, slices and watermark then)."""
    return state if end == len(state.blocks) else build(list(state.blocks[:end]))


def _watermark(state: DatasetState, end: int) -> datetime | None:
    """The watermark as of the first ``end`` blocks."""
    for stored in reversed(state.blocks[:end]):
        if isinstance(stored.block.event, AddData | ExecuteTransform):
            return stored.block.event.new_watermark
    return None


@dataclass(frozen=True)
class CurrentPlan:
    """The next step of a current-ODF derivative."""

    dataset: CurrentDataset
    state: DatasetState  # the derivative's chain as the step starts from it
    transform: TransformSql  # the query in force, in the engine port's form
    inputs: list[InputStep]
    prev_checkpoint: Checkpoint | None  # the newest data event's checkpoint
    prev_transform: TransformSql | None  # the query of the last step, when it differs
    # what a step does when the engine drops rows as late (``store.late_rows``; a replay's and
    # the invariance check's step goes by what the chain records instead: ``recompute``)
    late_rows: LateRows = LateRows.DROP
    recompute: bool = False  # the step is recomputed (a replayed step that named no checkpoint)
    # a recomputed step may read and keep the rows folded so far (``held_rows``): a pull's step,
    # never a replay's or the invariance check's, which fold from the slices alone
    keep_rows: bool = False

    @property
    def vocab(self) -> Vocabulary:
        return vocabulary_of(self.state.vocab)

    @property
    def waiting_for(self) -> list[str]:
        return [i.dataset.id for i in self.inputs if not i.state.slices]

    @property
    def up_to_date(self) -> bool:
        return not any(i.has_news for i in self.inputs) and self.prev_transform is None

    def transaction_id(self) -> str:
        """The same step (same head, same input blocks, same query) always gets the same id."""
        h = hashlib.sha3_256(self.state.head.to_bytes())
        for i in self.inputs:
            h.update(i.state.head.to_bytes() + b"|")
        h.update(repr(self.transform).encode())
        return h.hexdigest()[:24]


def engine_transform(event: SetTransform) -> TransformSql:
    """The query of ``event`` as the engine port takes it, with ODF's watermark rule."""
    return replace(transform_sql(event.transform), input_watermarks=InputWatermarks.RECORDED)


def plan_current(ws: Workspace, ds: CurrentDataset, state: DatasetState) -> CurrentPlan:
    """The next step of the derivative ``ds`` whose chain is ``state``."""
    if state.transform is None:
        raise Invalid(f"{ds.id} has no SetTransform: it is not a derivative")
    inputs = CurrentDatasets(ws)
    last: ExecuteTransform | None = None
    ran_with: SetTransform | None = None  # the SetTransform in force at the last step
    in_force: SetTransform | None = None
    for stored in state.blocks:
        event = stored.block.event
        if isinstance(event, SetTransform):
            in_force = event
        elif isinstance(event, ExecuteTransform):
            last, ran_with = event, in_force
    recorded = {q.dataset_id: q for q in last.query_inputs} if last else {}
    steps = []
    for given in state.transform.inputs:
        input_ds = inputs.input_dataset(given, ds.id)
        input_state = input_ds.state()
        steps.append(plan_input(inputs, input_ds, alias_of(given), input_state,
                                recorded.get(input_state.id)))
    transform = engine_transform(state.transform)
    changed = ran_with is not None and ran_with.transform != state.transform.transform
    last_data = state.rules.last_data
    return CurrentPlan(ds, state, transform, steps,
                       last_data.new_checkpoint if last_data is not None else None,
                       engine_transform(ran_with) if changed and ran_with else None,
                       late_rows_policy(ws, ds.id), keep_rows=True)


def alias_of(given: TransformInput) -> str:
    assert given.alias is not None, "the chain rules require an alias for every input"
    return given.alias


@dataclass(frozen=True)
class StepOutput:
    """What one engine step produced, not committed: the block's event and its files."""

    event: ExecuteTransform
    schema: SetDataSchema | None  # to append before the event: new or grown
    data_path: Path | None
    checkpoint_dir: Path | None  # the engine's new checkpoint folder (None: a recomputed step)
    late_rows: int  # dropped as late
    # inputs' rows the engine holds back after the step, each named by its workspace dataset
    pending_rows: tuple[PendingRows, ...] = ()
    recomputed_for: str | None = None  # why a streamed step was recomputed (``lateRows: correct``)


def run_current_step(engine: Engine, plan: CurrentPlan, *, system_time: datetime,
                     prev_checkpoint_dir: Path | None, scratch: Path,
                     progress: Callable[[EngineProgress], None] | None = None) -> StepOutput:
    """Run the plan's step in the engine from ``prev_checkpoint_dir`` (a folder) writing into
    ``scratch``. The event names no new checkpoint: a pull packs ``checkpoint_dir`` and names
    that file; a replay keeps the folder for its next step."""
    v = plan.vocab
    mode = step_mode(engine, plan)  # before any data is processed
    if mode is StepMode.RECOMPUTE:
        return recompute_step(engine, plan, system_time=system_time, scratch=scratch)
    passing_on = mode is StepMode.PASS_ON
    temporal = {t.id for t in plan.transform.temporal_tables or ()}
    correcting = plan.late_rows is LateRows.CORRECT

    def recomputed(why: str) -> StepOutput:  # the step as RECOMPUTE runs it, and why
        out = recompute_step(engine, plan, system_time=system_time, scratch=scratch / "recomputed")
        return replace(out, recomputed_for=why)

    if correcting and (why := _late_versions(plan, temporal)):
        return recomputed(why)
    inputs = [i.as_temporal_table(scratch) if i.alias in temporal and i.retracting is not None
              else i.execute_input() for i in plan.inputs]
    step = EngineStep(plan.transaction_id(), plan.dataset.id, inputs,
                      plan.transform, engine_vocab(v), prev_checkpoint_dir, plan.prev_transform)
    try:
        result, checkpoint_dir = execute_step(engine, step, scratch, system_time=system_time,
                                              progress=progress)
    except EngineError as e:
        if not correcting or e.kind is not EngineErrorKind.INVALID_QUERY:
            raise
        # a query Spark cannot stream (an aggregate without a window, say) may still be one
        # over the inputs' rows; if that fails too, the streaming error is the one to show
        try:
            return recomputed("its query cannot run as a stream (an aggregate without a window, "
                              "say), so it is computed over its inputs' rows at each step "
                              "(lateRows: correct)")
        except EngineError:
            raise e from None
    if correcting and not temporal and (why := _why_recompute(plan, result)):
        # the step again, over the inputs' rows: what arrived late corrects the results, and
        # nothing is held back with no bound to release it by
        return recomputed(why)
    new_data: DataSlice | None = None
    data_path = schema = None
    prev_offset = plan.state.last_offset
    if result.output_path is not None:
        table = pq.read_table(result.output_path)
        if passing_on:
            table = in_input_order(table, v)
        # the block numbers and stamps its records: an input's offset and system time that
        # the query carried over (SELECT *) are not the output's
        table = table.drop_columns([c for c in (v.system_time, v.offset) if c in table.column_names])
        stored, schema = _fitted(plan, build_slice(table, system_time=system_time,
                                                   prev_offset=prev_offset, vocabulary=v))
        data_path = scratch / "slice.parquet"
        new_data = data_slice_of(write_slice(stored, data_path, v))
    watermark, before = result.output_watermark, plan.state.watermark
    if before is not None and (watermark is None or watermark < before):
        watermark = before  # never back, never gone (the chain rules)
    event = ExecuteTransform(
        query_inputs=[i.query_input() for i in plan.inputs],
        prev_checkpoint=plan.prev_checkpoint.physical_hash if plan.prev_checkpoint else None,
        prev_offset=prev_offset, new_data=new_data,
        new_watermark=watermark)
    names = {i.alias: i.dataset.id for i in plan.inputs}
    pending = tuple(replace(p, input=names.get(p.input, p.input),
                            waiting_for=tuple(names.get(t, t) for t in p.waiting_for))
                    for p in result.pending_rows)
    return StepOutput(event, schema, data_path, checkpoint_dir, result.late_rows, pending)


def _why_recompute(plan: CurrentPlan, result: ExecuteResult) -> str | None:
    """Why a streamed step of a derivative that corrects (``lateRows: correct``) is computed
    again as RECOMPUTE, in words: the engine dropped rows as late, or the query holds its rows
    back with no time bound (a join with none: its output watermark stays unknown once every
    input has one); None: the streamed step stands."""
    inputs = [i.dataset.id for i in plan.inputs]
    if result.late_rows:
        return late_rows_words(plan.dataset.id, inputs, result.late_rows, corrected=True)
    if result.output_watermark is None and all(i.state.watermark is not None for i in plan.inputs):
        return (f"its query holds rows back with no time bound to release them by (a join with no "
                f"time bound), so that {plan.dataset.id} would never close a window behind it; it "
                "is recomputed over its inputs' rows at each step from now on (lateRows: correct)")
    return None


def _late_versions(plan: CurrentPlan, temporal: set[str]) -> str | None:
    """Why a temporal join of a derivative that corrects (``lateRows: correct``) is recomputed
    rather than streamed, in words: a temporal table got versions dated behind its watermark,
    which events already joined should have met; None: none did."""
    for i in plan.inputs:
        if i.alias in temporal and (n := i.behind_watermark()):
            versions = f"{n:,} versions" if n != 1 else "1 version"
            return (f"{versions} of {i.dataset.id} dated behind its watermark corrected the rows "
                    f"joined before (lateRows: correct): {plan.dataset.id} is recomputed over its "
                    "inputs' rows at each step from now on")
    return None


def step_mode(engine: Engine, plan: CurrentPlan) -> StepMode:
    """How the step runs: APPEND_ONLY when no input it reads can hold retractions or
    corrections (``InputStep.retracting``) and no earlier step was recomputed; PASS_ON when the
    query is projections and filters over such an input whose output copies its op and offset
    (the engine's ``RowMapping``); RECOMPUTE for any other query, and for every step after a
    recomputed one. A query reading such an input's system columns, or it as a temporal table,
    is refused (``RetractionsRefused``), in one line naming the input and why."""
    last = plan.state.rules.last_data
    if plan.recompute or (last is not None and last.new_checkpoint is None):
        return StepMode.RECOMPUTE  # a recomputed step before: no streaming state to go on from
    retracting = [(i, why) for i in plan.inputs if (why := i.retracting) is not None]
    if not retracting:
        return StepMode.APPEND_ONLY
    mapping = engine.derive_row_mapping(RowMappingRequest(**_over_schemas(plan)))
    temporal = {t.id for t in plan.transform.temporal_tables or ()}
    for i, why in retracting:
        # (the pull and verify name the dataset before it)
        refused = f"input {i.dataset.id} can hold retractions and corrections ({why})"
        if i.alias in temporal:
            continue  # its history becomes versions (``InputStep.as_temporal_table``)
        op, offset = plan.vocab.operation_type, plan.vocab.offset
        select = (f"SELECT {_as(i.vocab.operation_type, op)}, {_as(i.vocab.offset, offset)}, ... "
                  f"FROM {i.alias} WHERE ...")
        if mapping.operator is not None:
            return StepMode.RECOMPUTE
        if mapping.input != i.alias:
            continue  # the query does not read it
        # a retraction carries its record's values, not its op, offset or system time: what
        # is filtered on or computed from those would tell the two apart
        system = (i.vocab.operation_type, i.vocab.offset, i.vocab.system_time)
        if filtered := [c for c in system if c in mapping.filtered]:
            raise RetractionsRefused(
                f"{refused}, which the query cannot pass on: it filters on {', '.join(filtered)}, "
                "so a retraction or correction could be kept without the record it undoes or "
                "dropped with it kept; filter on the event time and data columns only")
        consumed = (op, offset, plan.vocab.system_time)  # checked above, or dropped
        for column, read in mapping.sources.items():
            if column not in consumed and (used := [c for c in system if c in read]):
                raise RetractionsRefused(
                    f"{refused}, which the query cannot pass on: its column {column} is computed "
                    f"from {', '.join(used)}, so a retraction would not carry the values of the "
                    "record it retracts; compute the output's columns from the event "
                    "time and data columns only")
        if mapping.copies.get(op) != i.vocab.operation_type:
            return StepMode.RECOMPUTE  # values only: computed over the input's rows
        if mapping.copies.get(offset) != i.vocab.offset:
            raise RetractionsRefused(
                f"{refused}; the output carries op but not offset, which puts its records in the "
                "input's order: select the input's offset unchanged too "
                f"({select})")
        return StepMode.PASS_ON
    return StepMode.APPEND_ONLY


def recompute_step(engine: Engine, plan: CurrentPlan, *, system_time: datetime,
                   scratch: Path) -> StepOutput:
    """The step as RECOMPUTE runs it: the query once over each input's rows up to the step,
    and the records that take the derivative's rows there (module docstring)."""
    # DuckDB and Arrow's datasets (which bring pandas): only for a step that recomputes
    import pyarrow.dataset as pads

    from ..data.row_changes import changes
    from .held_rows import write_held_rows

    v = plan.vocab
    scratch.mkdir(parents=True, exist_ok=True)
    temporal = {t.id for t in plan.transform.temporal_tables or ()}
    inputs = []
    for k, i in enumerate(plan.inputs):
        path = scratch / f"rows-{k}.parquet"
        if i.alias in temporal:  # its history: the versions a temporal join reads
            inputs.append(i.versions(path))
            continue
        write_held_rows(plan.dataset, i.dataset, i.state, path, cached=plan.keep_rows)
        inputs.append(ExecuteInput(dataset_id=i.alias, vocab=engine_vocab(i.vocab),
                                   schema=pq.read_schema(path), data_paths=[path]))
    answer_path = scratch / "answer.parquet"
    try:
        result = engine.preprocess(PreprocessRequest(
            transaction_id=plan.transaction_id(), dataset_id=plan.dataset.id, input_path=None,
            transform=plan.transform, output_path=answer_path, inputs=inputs))
    except EngineError as e:
        system = {i.vocab.operation_type for i in plan.inputs} | {i.vocab.offset for i in plan.inputs}
        if e.kind is EngineErrorKind.INVALID_QUERY and any(c in e.message for c in system):
            raise EngineError(e.kind, f"{e.message} (the query runs over the rows its inputs' "
                                      "change logs describe, which have no op or offset)",
                              e.position) from None
        raise
    # the answer and the derivative's rows in the answer's columns (one a changed query adds
    # reads null in the rows held, so every row changes; one it drops is left out, and
    # ``_fitted`` refuses the drop), read by DuckDB from the files: memory does not follow them
    columns = pa.schema([f for f in pq.read_schema(answer_path)
                         if f.name not in (v.system_time, v.offset, v.operation_type)])
    answer = pads.dataset(answer_path, schema=columns)
    held = scratch / "held.parquet"
    if plan.state.slices:
        write_held_rows(plan.dataset, plan.dataset, plan.state, held, cached=plan.keep_rows)
    else:
        pq.write_table(columns.empty_table(), held)
    new_data: DataSlice | None = None
    data_path = schema = None
    prev_offset = plan.state.last_offset
    key = tuple(c for c in result.key_columns if c in columns.names)
    written = changes(pads.dataset(held, schema=columns), answer, v.operation_type, key, spill=scratch)
    if written.num_rows:
        stored, schema = _fitted(plan, build_slice(written, system_time=system_time,
                                                   prev_offset=prev_offset, vocabulary=v))
        data_path = scratch / "slice.parquet"
        new_data = data_slice_of(write_slice(stored, data_path, v))
    watermarks = [i.state.watermark for i in plan.inputs]
    watermark = min(watermarks) if all(w is not None for w in watermarks) else None  # type: ignore[type-var]
    before_watermark = plan.state.watermark
    if before_watermark is not None and (watermark is None or watermark < before_watermark):
        watermark = before_watermark  # never back, never gone (the chain rules)
    event = ExecuteTransform(
        query_inputs=[i.query_input() for i in plan.inputs],
        prev_checkpoint=plan.prev_checkpoint.physical_hash if plan.prev_checkpoint else None,
        prev_offset=prev_offset, new_data=new_data, new_watermark=watermark)
    return StepOutput(event, schema, data_path, None, 0)


def _as(column: str, name: str) -> str:
    return column if column == name else f"{column} AS {name}"


def in_input_order(table: pa.Table, v: Vocabulary) -> pa.Table:
    """A row-wise query's output over an input with retractions and corrections, as its
    consumers must see it: in the input's order (its ``offset``, which the output carries), a
    correct-from whose correct-to the query dropped a retraction, a correct-to whose
    correct-from it dropped an append (a pair is a correct-from and the correct-to at the
    next input offset)."""
    table = table.sort_by(v.offset)
    ops = table[v.operation_type].to_numpy()
    offsets = table[v.offset].to_numpy()
    nxt = np.append(ops[1:], -1)
    step = np.append(np.diff(offsets), 0)
    paired_from = (ops == Op.CORRECT_FROM) & (nxt == Op.CORRECT_TO) & (step == 1)
    paired_to = np.insert(paired_from[:-1], 0, False)
    fixed = np.where((ops == Op.CORRECT_FROM) & ~paired_from, Op.RETRACT,
                     np.where((ops == Op.CORRECT_TO) & ~paired_to, Op.APPEND, ops))
    column = table.schema.get_field_index(v.operation_type)
    return table.set_column(column, table.schema.field(column),
                            pa.array(fixed, table.schema.field(column).type))


def _fitted(plan: CurrentPlan, stored: pa.Table) -> tuple[pa.Table, SetDataSchema | None]:
    """The output slice fitted to the dataset's schema, and the SetDataSchema it needs first
    (None: the schema in force is its schema); an output that drops a column or changes one is
    refused (``schema_evolution``)."""
    recorded = plan.state.schema
    old, legacy = (recorded.schema if recorded else None), False
    if recorded is not None and old is None and recorded.raw_arrow_schema is not None:
        # a block written before RFC-016: an Arrow schema, which says nothing of nullability
        arrow = pa.ipc.read_schema(pa.py_buffer(recorded.raw_arrow_schema.to_bytes()))
        old, legacy = data_schema(arrow), True
    stored, grown = grown_schema(plan.dataset.id, stored, old, "the query's output", legacy=legacy)
    return stored, SetDataSchema(schema=grown) if grown is not None else None


def pull_current_derivative(ws: Workspace, name: str, engine: Callable[[], Engine], *,
                            progress: Callable[[EngineProgress], None] | None = None,
                            known: DatasetState | None = None) -> TransformResult:
    """Run the next step of the current-ODF derivative ``name`` and commit it."""
    ds = CurrentDataset(ws, name)
    with ds.writer(known) as w:
        state = w.state
        if state is None:
            raise Conflict(f"{name} has no blocks; add it again")
        plan = plan_current(ws, ds, state)
        if plan.waiting_for:
            return TransformResult(name, f"waiting for data from {', '.join(plan.waiting_for)}")
        if plan.up_to_date:
            return TransformResult(name, "up to date")
        running = engine()
        system_time = max(now_utc(), state.blocks[-1].block.system_time)
        scratch = running.workdir(plan.transaction_id())
        prev_dir = None
        if plan.prev_checkpoint is not None:
            prev_dir = unpack_checkpoint(ds.checkpoint_file(plan.prev_checkpoint),
                                         plan.prev_checkpoint, scratch / "prev-checkpoint")
        out = run_current_step(running, plan, system_time=system_time, prev_checkpoint_dir=prev_dir,
                               scratch=scratch, progress=progress)
        inputs = [i.dataset.id for i in plan.inputs]
        late = out.late_rows
        if late and plan.late_rows is LateRows.FAIL:
            raise LateRowsRefused(f"{late_rows_words(name, inputs, late)}; its transform says "
                                  "lateRows: fail, so nothing was committed")
        packed = None
        event = out.event
        if out.checkpoint_dir is not None:
            packed = scratch / "checkpoint.tar"
            pack_checkpoint(out.checkpoint_dir, packed)
            event = replace(out.event, new_checkpoint=checkpoint_of(packed))
        if _changes_nothing(event, plan):  # a query changed with nothing new to read, say
            return TransformResult(name, "up to date")
        crash_point("engine-answered")
        lineage = field_lineage(running, plan)
        if out.schema is not None:
            w.append(out.schema, system_time=system_time)
        h = w.append(event, system_time=system_time, data=out.data_path, checkpoint=packed)
        if lineage is not None:
            record_version(ds, state, h, lineage)
        record_pending(ws, name, h, list(out.pending_rows))
    n = event.new_data.offset_interval.end - event.new_data.offset_interval.start + 1 \
        if event.new_data else 0
    message = "; ".join([f"{n:,} new records", *([late_rows_words(name, inputs, late)] if late else []),
                         *([out.recomputed_for] if out.recomputed_for else []),
                         *(pending_words(p) for p in out.pending_rows)])
    return TransformResult(name, message, h.to_bytes(), n, event.new_watermark, late)


def field_lineage(engine: Engine, plan: CurrentPlan) -> FieldLineage | None:
    """The engine's field lineage of the plan's query over its inputs' schemas, each input named
    by its workspace dataset (the engine knows it by its alias); None: it cannot trace it."""
    names = {i.alias: i.dataset.id for i in plan.inputs}
    lineage = lineage_of(engine, LineageRequest(**_over_schemas(plan)))
    if lineage is None:
        return None

    def named(sources: list[FieldSource]) -> list[FieldSource]:
        return [replace(s, input=names.get(s.input, s.input)) for s in sources]

    return FieldLineage(fields=[replace(f, sources=named(f.sources)) for f in lineage.fields],
                        conditions=named(lineage.conditions) if lineage.conditions else None)


def _over_schemas(plan: CurrentPlan) -> dict:
    """The plan's query over its inputs' newest schemas, as the engine plans it without data."""
    schemas = []
    for i in plan.inputs:
        schema = i.schema()
        assert schema is not None, "planned only once every input has data"
        schemas.append(InputSchema(i.alias, engine_vocab(i.vocab), schema))
    return {"transaction_id": plan.transaction_id(), "dataset_id": plan.dataset.id,
            "inputs": schemas, "transform": plan.transform, "vocab": engine_vocab(plan.vocab)}


def _changes_nothing(event: ExecuteTransform, plan: CurrentPlan) -> bool:
    """No data, no input moved, the watermark and checkpoint as before: a block the chain
    rules refuse (the reference's too), so the step is not committed."""
    before = plan.prev_checkpoint.physical_hash if plan.prev_checkpoint else None
    after = event.new_checkpoint.physical_hash if event.new_checkpoint else None
    return (event.new_data is None and all(q.new_block_hash is None for q in event.query_inputs)
            and event.new_watermark == plan.state.watermark and after == before)


def replay_current(ws: Workspace, name: str, engine: Callable[[], Engine]) -> list[Problem]:
    """Re-run every step of the current-ODF derivative ``name`` from its inputs (spec: Dataset
    Validation) and compare: each ``ExecuteTransform``'s inputs as recorded, the engine's state
    the previous replayed step's (never a stored checkpoint), its system time; the records
    (logical hash and offsets) and the watermark must be the block's. Returns the problems,
    each at its block (``block <n> (<hash>): ...``); nothing is written to the dataset."""
    ds = CurrentDataset(ws, name)
    state = ds.state()
    inputs = CurrentDatasets(ws)
    kept = {b.hash: lineage for b, lineage in recorded_versions(ds, state)}  # field lineage
    problems: list[Problem] = []
    checkpoint: Path | None = None
    in_force: SetTransform | None = None
    ran_with: SetTransform | None = None
    for k, stored in enumerate(state.blocks):
        event = stored.block.event
        if isinstance(event, SetTransform):
            in_force = event
        if not isinstance(event, ExecuteTransform):
            continue
        if in_force is None:
            return [*problems, _problem(stored, "executed before any SetTransform")]
        steps = []
        for given, used in zip(in_force.inputs, event.query_inputs, strict=True):
            input_ds = inputs.input_dataset(given, name)
            start = ExecuteTransformInput(dataset_id=used.dataset_id, prev_block_hash=used.prev_block_hash,
                                          prev_offset=used.prev_offset)
            steps.append(plan_input(inputs, input_ds, alias_of(given), input_ds.state(), start,
                                    used.new_block_hash, replaying=True))
        changed = ran_with is not None and ran_with.transform != in_force.transform
        plan = CurrentPlan(ds, up_to(state, k), engine_transform(in_force), steps, None,
                           engine_transform(ran_with) if changed and ran_with else None,
                           recompute=event.new_checkpoint is None)
        running = engine()
        try:
            out = run_current_step(running, plan, system_time=stored.block.system_time,
                                   prev_checkpoint_dir=checkpoint,
                                   scratch=running.workdir(f"replay-{plan.transaction_id()}"))
        except InputRefused as e:
            return [*problems, _problem(stored, f"not replayed: {e}")]
        except SchemaChangeRefused as e:  # the replayed records are not the recorded ones
            return [*problems, _problem(stored, f"did not reproduce: {e}")]
        except EngineError as e:
            if e.kind is not EngineErrorKind.FORBIDDEN:
                raise
            # each step starts from the one before: nothing after a refused query replays
            return [*problems, _problem(stored, f"not replayed, the engine refuses its query: {e.message}")]
        checkpoint, ran_with = out.checkpoint_dir, in_force
        reason = _difference(event, out.event)
        if reason and out.data_path and event.new_checkpoint is None and event.new_data:
            # recorded before a recomputed step wrote an update as a pair: compare it so written
            if _difference(event, replace(out.event, new_data=_unpaired(out.data_path, plan.vocab))) is None:
                reason = None
        if reason is None and stored.hash in kept:  # an engine that cannot derive it: unchecked
            derived = field_lineage(running, plan)
            reason = lineage_difference(kept[stored.hash], derived) if derived is not None else None
        if reason:
            problems.append(_problem(stored, f"did not reproduce: {reason}"))
    return problems


def _unpaired(path: Path, v: Vocabulary) -> DataSlice:
    """The slice of the records in ``path`` with every correct-from / correct-to pair written
    as a retraction and an append (``row_changes.unpaired``), at the same offsets."""
    from ..data.row_changes import unpaired

    stored = pq.read_table(path)
    records = unpaired(stored.drop_columns([v.offset, v.system_time]), v.operation_type)
    rebuilt = build_slice(records, system_time=stored[v.system_time][0].as_py(),
                          prev_offset=stored[v.offset][0].as_py() - 1, vocabulary=v)
    return data_slice_of(write_slice(rebuilt, path.with_name("unpaired.parquet"), v))


def _problem(stored: StoredBlock, reason: str) -> Problem:
    return Problem(stored.hash.to_bytes(), reason,
                   f"block {stored.block.sequence_number} ({stored.hash})")


def _difference(recorded: ExecuteTransform, replayed: ExecuteTransform) -> str | None:
    a, b = recorded.new_data, replayed.new_data
    count = lambda s: s.offset_interval.end - s.offset_interval.start + 1 if s else 0  # noqa: E731
    if count(a) != count(b):
        return f"recorded {count(a)} records, replay gave {count(b)}"
    if a is not None and b is not None:
        if a.offset_interval != b.offset_interval:
            return "the replayed records have other offsets than the recorded ones"
        if a.logical_hash != b.logical_hash:
            return "the replayed output's logical hash differs from the recorded one"
    if recorded.new_watermark != replayed.new_watermark:
        return f"recorded watermark {recorded.new_watermark}, replay gave {replayed.new_watermark}"
    if recorded.query_inputs != replayed.query_inputs:
        return "the replay read other input intervals than the block records"
    return None
