"""Reproducibility (spec: Dataset Validation): re-run every recorded step and compare.

Steps are replayed in chain order from an empty state, each from the checkpoint the previous
replayed step produced (never from the stored checkpoints), with the inputs each block
recorded and its recorded system time; the output slice hash, record count and watermark must
match what the block says, and so must a recorded field lineage (derived again by the engine).
A query the engine's SQL policy refuses is reported as the block's problem and not run.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..engine.port import Engine, EngineError, EngineErrorKind
from ..metadata.chain import ChainBlock
from ..metadata.objects import (
    DatasetSourceDerivative,
    DatasetVocabulary,
    EngineIdentity,
    MetadataBlock,
    TransformSql,
)
from ..metadata.timestamps import IntervalType, now_utc
from ..trust.slice_check import ChangedSlice
from ..trust.verify import Problem
from ..workspace import Dataset
from .execute import run_step
from .plan import TransformPlan, plan_input
from .record_lineage import derive_field_lineage, lineage_difference


def make_replay(engine: Callable[[], Engine]):
    def replay(ds: Dataset, chain: list[ChainBlock]) -> list[Problem]:
        problems: list[Problem] = []
        source: DatasetSourceDerivative | None = None
        vocab = DatasetVocabulary()
        checkpoint: Path | None = None
        last_transform: TransformSql | None = None
        for cb in chain:
            block = cb.block
            if isinstance(block.source, DatasetSourceDerivative):
                source = block.source
            vocab = block.vocab or vocab
            if block.input_slices is None:
                continue
            if source is None:
                problems.append(Problem(cb.hash, "executed before any block sets its transform"))
                return problems
            inputs = []
            for input_id, recorded in zip(source.inputs, block.input_slices, strict=True):
                iv = recorded.interval
                empty = iv.type is IntervalType.EMPTY
                after = None if empty else iv.left
                until = block.system_time if empty else iv.right
                input_plan = plan_input(ds.ws.dataset(input_id), after if not empty else until, until)
                if input_plan.consumed_slice().hash != recorded.hash and not empty:
                    problems.append(Problem(cb.hash, f"input {input_id} no longer holds the data this "
                                                     "block consumed (its slices changed)"))
                inputs.append(input_plan)
            migrate_from = last_transform if last_transform not in (None, source.transform) else None
            plan = TransformPlan(ds, block.prev_block_hash or b"", block.system_time, source.transform,
                                 vocab, inputs, checkpoint, migrate_from)
            try:
                replayed, _, checkpoint = run_step(engine(), plan, system_time=block.system_time)
            except ChangedSlice as error:  # an input's slice is not what its block records
                problems.append(Problem(cb.hash, f"not replayed: {error}"))
                return problems
            except EngineError as error:
                if error.kind is not EngineErrorKind.FORBIDDEN:
                    raise
                # A query from someone else: refused before it ran, and nothing after it can
                # be replayed (each step starts from the previous one's checkpoint).
                refused = f"not replayed, the engine refuses its query: {error.message}"
                problems.append(Problem(cb.hash, refused))
                return problems
            last_transform = source.transform
            reason = _difference(block, replayed)
            if reason is None and block.field_lineage is not None:
                reason = _lineage_difference(engine(), plan, block)
            if reason:
                problems.append(Problem(cb.hash, f"did not reproduce: {reason}"))
        return problems

    return replay


def _lineage_difference(engine: Engine, plan: TransformPlan, block: MetadataBlock) -> str | None:
    """The recorded field lineage against the engine's; an engine that cannot derive it
    (an older build, a plan it cannot trace) leaves it unchecked rather than failed."""
    assert block.field_lineage is not None
    derived = derive_field_lineage(engine, plan)
    return None if derived is None else lineage_difference(block.field_lineage, derived)


def _difference(recorded: MetadataBlock, replayed: MetadataBlock) -> str | None:
    a, b = recorded.output_slice, replayed.output_slice
    if a is None or b is None or a.num_records != b.num_records:
        if a is not None or b is not None:
            return f"recorded {a.num_records if a else 0} records, replay gave {b.num_records if b else 0}"
    elif a.hash != b.hash:
        return "the replayed output's logical hash differs from the recorded one"
    if recorded.output_watermark != replayed.output_watermark:
        return f"recorded watermark {recorded.output_watermark}, replay gave {replayed.output_watermark}"
    late = (recorded.late_rows or 0, replayed.late_rows or 0)
    if late[0] != late[1]:
        return f"recorded {late[0]:,} rows dropped as late, replay dropped {late[1]:,}"
    return None


def same_engine(a: EngineIdentity | None, b: EngineIdentity | None) -> bool:
    """The same engine build (where it ran, master and network aside)."""
    key = lambda e: (e.runtime, e.version, e.spark_version, e.image_digest, e.files_hash)  # noqa: E731
    return a is not None and b is not None and key(a) == key(b)


def engine_note(ds: Dataset, replayed_with: EngineIdentity) -> str:
    """Whether the chain's own records vouch for the engine a replay used."""
    chain = [b for _, b in ds.blocks()]
    recorded = [b.engine for b in chain if b.engine is not None]
    if all(same_engine(e, replayed_with) for e in recorded):
        return "the recorded engine"
    if any(same_engine(b.compatible_engine, replayed_with) for b in chain):
        return "an engine the chain records as compatible"
    return "an engine that differs from the recorded one (no compatibility record)"


def record_compatibility(ds: Dataset, engine: EngineIdentity) -> bytes:
    """Engine deprecation: a signed block saying the whole chain reproduces with ``engine``."""
    with ds.writer() as w:
        return w.commit(MetadataBlock(system_time=now_utc(), compatible_engine=engine))
