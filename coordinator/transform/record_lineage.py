"""Recording field-level lineage on a derivative's chain (the FieldLineage extension).

Field lineage is a function of the transform in force and its inputs' schemas. At each
executed step of a pull, the engine session already running derives it for the step's plan;
it is put on the block being committed only when it differs from the newest one recorded on
the chain, so a new version appears exactly when the query or an input's schema changes what
the columns come from. verify (replay.py) derives it again for each recording block and
compares. A plan the engine cannot trace records nothing (never a guess) and does not stop
the pull.
"""
from __future__ import annotations

from dataclasses import replace

from ..engine.port import Engine, EngineError, EngineErrorKind, InputSchema, LineageRequest
from ..metadata.objects import FieldLineage, MetadataBlock
from ..workspace import DatasetState
from .plan import TransformPlan


def derive_field_lineage(engine: Engine, plan: TransformPlan) -> FieldLineage | None:
    """The engine's field lineage for ``plan``'s transform over its inputs' schemas; None when
    the engine cannot trace it column by column (an older build, or a plan shape it refuses)."""
    inputs = [InputSchema(i.dataset.id, i.vocab, i.schema) for i in plan.inputs if i.schema is not None]
    return lineage_of(engine, LineageRequest(
        transaction_id=plan.transaction_id(), dataset_id=plan.dataset.id, inputs=inputs,
        transform=plan.transform, vocab=plan.vocab,
    ))


def lineage_of(engine: Engine, request: LineageRequest) -> FieldLineage | None:
    """The engine's answer to ``request``; None when it cannot trace the plan (UNSUPPORTED)."""
    try:
        return engine.derive_field_lineage(request)
    except EngineError as error:
        if error.kind is not EngineErrorKind.UNSUPPORTED:
            raise
        return None


def recorded_field_lineage(state: DatasetState | None) -> FieldLineage | None:
    """The newest field lineage on the chain (None before any is recorded)."""
    blocks = state.blocks if state is not None else ()
    return next((b.field_lineage for _, b in blocks if b.field_lineage is not None), None)


def with_field_lineage(lineage: FieldLineage | None, block: MetadataBlock,
                       state: DatasetState | None) -> MetadataBlock:
    """``block`` carrying the plan's field lineage (``derive_field_lineage``) if that starts a
    new version. A query the engine cannot trace column by column still runs: its blocks record
    no field lineage."""
    if lineage is None or lineage == recorded_field_lineage(state):
        return block
    return replace(block, field_lineage=lineage)


def lineage_difference(recorded: FieldLineage, derived: FieldLineage) -> str | None:
    """Where a recorded field lineage differs from the engine's, in words (None: the same).

    Engines before 2026-11-26 also recorded the ``IS NOT NULL`` filter Spark puts under a time
    window as a filter condition of the window's column; such a filter counts as the window's
    own condition on both sides, so what they recorded still reproduces."""
    if recorded == derived or _window_filters_dropped(recorded) == _window_filters_dropped(derived):
        return None
    old = {f.field: f.sources for f in recorded.fields}
    new = {f.field: f.sources for f in derived.fields}
    for name in [*old, *(n for n in new if n not in old)]:
        if old.get(name) != new.get(name):
            return f"the recorded field lineage of column '{name}' differs from the engine's"
    return "the recorded field lineage's conditions differ from the engine's"


def _window_filters_dropped(lineage: FieldLineage) -> FieldLineage:
    """``lineage`` without the ``... IS NOT NULL`` filters of columns a window condition reads."""
    conditions = lineage.conditions or []
    windowed = {(c.input, c.field) for c in conditions if c.kind == "window"}
    kept = [c for c in conditions
            if not (c.kind == "filter" and (c.input, c.field) in windowed
                    and (c.expression or "").strip("() ").upper().endswith("IS NOT NULL"))]
    return replace(lineage, conditions=kept or None)
