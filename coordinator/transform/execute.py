"""Pulling a derivative: batch step → migrate if needed → execute → hash → commit.

Exactly once: the engine writes its output and new checkpoint into a scratch folder and never
touches the committed previous checkpoint, so a coordinator that dies after the engine answered
but before the commit simply re-runs the same transaction on the next pull.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..data.hashing import file_logical_hash
from ..data.slices import output_slice as data_slice
from ..engine.port import (
    Engine,
    EngineProgress,
    ExecuteInput,
    ExecuteRequest,
    ExecuteResult,
    MigrateRequest,
)
from ..errors import CoordError
from ..metadata.objects import DatasetVocabulary, LateRows, MetadataBlock, TransformSql
from ..metadata.timestamps import now_utc
from ..workspace import DatasetState, Workspace
from ..workspace.crash import crash_point
from ..workspace.fsutil import physical_hash
from .builds import late_rows_words
from .change_log import change_log_join_warnings
from .plan import TransformPlan, plan_transform
from .record_lineage import derive_field_lineage, with_field_lineage


class LateRowsRefused(CoordError):
    """The step dropped rows as late and the dataset asked to fail then (``lateRows: fail``)."""


@dataclass
class TransformResult:
    dataset_id: str
    message: str
    block_hash: bytes | None = None
    num_records: int = 0
    watermark: datetime | None = None
    late_rows: int = 0  # rows the step dropped for arriving behind a watermark
    warnings: list[str] = field(default_factory=list)  # about the query, one line each


def pull_derivative(
    ws: Workspace,
    dataset_id: str,
    engine: Callable[[], Engine],
    *,
    progress: Callable[[EngineProgress], None] | None = None,
    state: DatasetState | None = None,
) -> TransformResult:
    """``state``: the dataset as this command already read it (taken if still current)."""
    ds = ws.dataset(dataset_id)
    with ds.writer(state) as w:
        plan = plan_transform(ws, ds, w.state)
        if plan.waiting_for:
            return TransformResult(dataset_id, f"waiting for data from {', '.join(plan.waiting_for)}")
        if plan.up_to_date:
            return TransformResult(dataset_id, "up to date")
        running = engine()
        block, data_file, checkpoint = run_step(running, plan, system_time=max(now_utc(), plan.head_time),
                                                progress=progress)
        late = block.late_rows or 0
        inputs = [i.dataset.id for i in plan.inputs]
        if late and plan.transform.late_rows is LateRows.FAIL:
            raise LateRowsRefused(f"{late_rows_words(dataset_id, inputs, late)}; its transform says "
                                  "lateRows: fail, so nothing was committed")
        lineage = derive_field_lineage(running, plan)
        block = with_field_lineage(lineage, block, w.state)
        warnings = change_log_join_warnings(
            lineage, {i.dataset.id: i.dataset.state().source for i in plan.inputs},
            {t.id for t in plan.transform.temporal_tables or []})
        crash_point("engine-answered")
        h = w.commit(block, data_file=data_file, checkpoint_dir=checkpoint)
    n = block.output_slice.num_records if block.output_slice else 0
    message = f"{n:,} new records" + (f"; {late_rows_words(dataset_id, inputs, late)}" if late else "")
    return TransformResult(dataset_id, message, h, n, block.output_watermark, late, warnings)


def run_step(
    engine: Engine, plan: TransformPlan, *, system_time: datetime,
    progress: Callable[[EngineProgress], None] | None = None,
) -> tuple[MetadataBlock, Path | None, Path]:
    """Run one transaction in the engine; return the block to commit, its data and checkpoint.

    Also used by verify to replay a recorded step (with its recorded system time)."""
    result, checkpoint = execute_plan(engine, plan, system_time=system_time, progress=progress)
    output_slice = None
    if result.output_path is not None:
        # a batch at a time: an output slice can be larger than memory allows to hold
        logical, rows = file_logical_hash(result.output_path, plan.vocab.event_time,
                                          plan.vocab.system_time)
        output_slice = data_slice(
            logical_hash=logical, physical_hash=physical_hash(result.output_path),
            num_records=rows, system_time=system_time,
        )
    block = MetadataBlock(
        system_time=system_time,
        output_slice=output_slice,
        output_watermark=result.output_watermark,
        input_slices=[i.consumed_slice() for i in plan.inputs],
        engine=engine.identity,
        late_rows=result.late_rows or None,  # absent when none: the block hashes as before
    )
    return block, result.output_path, checkpoint


def execute_plan(
    engine: Engine, plan: TransformPlan, *, system_time: datetime,
    progress: Callable[[EngineProgress], None] | None = None,
) -> tuple[ExecuteResult, Path]:
    """The plan's Execute call (after a Migrate when its query changed), in a scratch folder
    of the engine; its result and the new checkpoint. Nothing is committed."""
    inputs = [
        ExecuteInput(
            dataset_id=i.dataset.id, vocab=i.vocab, schema=i.schema, data_paths=i.data_paths,
            explicit_watermarks=i.explicit_watermarks,
            system_time_interval=str(i.consumed_slice().interval), removal=i.removal,
        )
        for i in plan.inputs
    ]
    step = EngineStep(plan.transaction_id(), plan.dataset.id, inputs, plan.transform, plan.vocab,
                      plan.prev_checkpoint, plan.prev_transform)
    return execute_step(engine, step, engine.workdir(step.transaction_id), system_time=system_time,
                        progress=progress)


@dataclass(frozen=True)
class EngineStep:
    """One transaction as the engine sees it, whichever ODF version the chains are in."""

    transaction_id: str
    dataset_id: str
    inputs: list[ExecuteInput]
    transform: TransformSql
    vocab: DatasetVocabulary
    prev_checkpoint: Path | None  # the engine's folder; None on the first run
    prev_transform: TransformSql | None  # the query of the last run, when it differs


def execute_step(
    engine: Engine, step: EngineStep, scratch: Path, *, system_time: datetime,
    progress: Callable[[EngineProgress], None] | None = None,
) -> tuple[ExecuteResult, Path]:
    """The step's Execute call (after a Migrate when its query changed) writing into
    ``scratch`` (a folder of the engine's); its result and the new checkpoint folder."""
    prev_checkpoint = step.prev_checkpoint
    if step.prev_transform is not None:  # the query changed since the last executed block
        migrated = scratch / "migrated-checkpoint"
        engine.migrate(MigrateRequest(
            transaction_id=step.transaction_id, dataset_id=step.dataset_id,
            prev_transform=step.prev_transform, next_transform=step.transform,
            prev_checkpoint_dir=prev_checkpoint, new_checkpoint_dir=migrated,
        ))
        prev_checkpoint = migrated
    request = ExecuteRequest(
        transaction_id=step.transaction_id,
        dataset_id=step.dataset_id,
        inputs=step.inputs,
        transform=step.transform,
        vocab=step.vocab,
        prev_checkpoint_dir=prev_checkpoint,
        new_checkpoint_dir=scratch / "checkpoint",
        output_data_path=scratch / "output.parquet",
        system_time=system_time,
        on_progress=progress,
    )
    return engine.execute(request), request.new_checkpoint_dir
