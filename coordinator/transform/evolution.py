"""Query evolution of a 0.18 derivative (spec: Dataset Evolution): a new query may only add
columns.

The engine validates the new query against the inputs' schemas and answers the output schema;
``metadata.schema_evolution.added_columns`` decides whether the dataset's schema may become it.
"""
from __future__ import annotations

import uuid

from ..data.odf_schema import arrow_columns
from ..engine.port import Engine, InputSchema, ValidateRequest
from ..metadata.objects import DatasetSnapshot, DatasetSourceDerivative
from ..metadata.schema_evolution import added_columns
from ..workspace import Dataset, DatasetState, Workspace
from .plan import plan_input


def transform_changed(snapshot: DatasetSnapshot, current: DatasetState) -> bool:
    return isinstance(snapshot.source, DatasetSourceDerivative) and snapshot.source != current.source


def check_query_change(engine: Engine, ws: Workspace, ds: Dataset, snapshot: DatasetSnapshot,
                       current: DatasetState) -> None:
    source, previous = snapshot.source, current.source
    # the catalog calls this for a changed derivative (transform_changed) of a derivative
    assert isinstance(source, DatasetSourceDerivative) and isinstance(previous, DatasetSourceDerivative)
    inputs = [plan_input(ws.dataset(i), None) for i in source.inputs]
    missing = [i.dataset.id for i in inputs if i.schema is None]
    if missing:
        return  # nothing to validate against yet; Execute reports errors when data arrives
    vocab = snapshot.vocab or current.vocab
    new = engine.validate(ValidateRequest(
        transaction_id=f"validate-{uuid.uuid4().hex[:12]}", dataset_id=ds.id,
        inputs=[InputSchema(i.dataset.id, i.vocab, i.schema) for i in inputs],
        transform=source.transform, vocab=vocab, previous_transform=previous.transform,
    )).schema
    old = current.schema(ds)
    if old is None:
        return
    leave_out = [vocab.system_time]
    added_columns(ds.id, arrow_columns(old, leave_out), arrow_columns(new, leave_out), "the new query")
