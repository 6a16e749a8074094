"""Query evolution (spec: Dataset Evolution): a new query may only add columns.

The engine validates the new query against the inputs' schemas and answers the output
schema; every column the dataset already has must still be there with the same type.
"""
from __future__ import annotations

import pyarrow.parquet as pq

from ..engine.client import InputSchema
from ..errors import CoordError
from ..metadata.objects import DatasetSnapshot, DatasetSourceDerivative
from ..workspace import Dataset, DatasetSummary, Workspace
from .engine_session import EngineSession
from .plan import plan_input


class QueryChangeRefused(CoordError):
    pass


def transform_changed(snapshot: DatasetSnapshot, current: DatasetSummary) -> bool:
    return isinstance(snapshot.source, DatasetSourceDerivative) and snapshot.source != current.source


def check_query_change(session: EngineSession, ws: Workspace, ds: Dataset, snapshot: DatasetSnapshot,
                       current: DatasetSummary) -> None:
    source, previous = snapshot.source, current.source
    # the catalog calls this for a changed derivative (transform_changed) of a derivative
    assert isinstance(source, DatasetSourceDerivative) and isinstance(previous, DatasetSourceDerivative)
    inputs = [plan_input(ws.dataset(i), None) for i in source.inputs]
    missing = [i.dataset.id for i in inputs if i.schema is None]
    if missing:
        return  # nothing to validate against yet; Execute reports errors when data arrives
    vocab = snapshot.vocab or current.vocab
    new = session.client.validate(
        ds.id, [InputSchema(i.dataset.id, i.vocab, i.schema) for i in inputs],
        source.transform, vocab, previous_transform=previous.transform,
    ).schema
    files = ds.data_files()
    if not files:
        return
    old = pq.read_schema(files[-1])
    for f in old:
        if f.name == vocab.system_time:
            continue
        if f.name not in new.names:
            raise QueryChangeRefused(f"{ds.id}: the new query drops column '{f.name}'; "
                                     "a query may only add columns")
        if not new.field(f.name).type.equals(f.type):
            raise QueryChangeRefused(f"{ds.id}: the new query changes column '{f.name}' from "
                                     f"{f.type} to {new.field(f.name).type}; a query may only add columns")
