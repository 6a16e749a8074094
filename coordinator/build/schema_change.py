"""A new definition of a current-ODF (0.39) dataset checked against the schema its records
have, before ``coord add --replace`` writes it (``store.define.Definitions``' ``check_change``).

``metadata.schema_evolution.added_columns`` decides, as it does at a pull; checking here refuses the
definition itself, instead of leaving one in force that every later pull refuses. Nothing is
checked before the dataset has a schema (its first data), as for 0.18.

- A root's read schema, where it declares one and no preprocess query reshapes what was read:
  it is the data columns of the next slices, so each data column of the schema in force must
  be declared with its type (the event time and system columns apart).
- A derivative's query: the engine validates it over its inputs' newest schemas (0.18 does the
  same, ``transform.evolution``) and its output columns, as stored, are compared with the
  dataset's.
- Nullability is left to the pull: the first one records what the read step declares, as
  the reference does (``ingest.current.declared_required``), and afterwards the schema in
  force keeps it (``grown_schema``), so a new read schema's nullability changes nothing.
"""
from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..metadata.odf39 import events as e
from ..metadata.schema_evolution import Column, added_columns, odf_columns

if TYPE_CHECKING:
    import pyarrow as pa

    from ..engine.port import Engine, InputSchema
    from ..metadata.odf39.data import DataSchema
    from ..store.read import DatasetState
    from ..workspace import Workspace


def check_definition(ws: Workspace, engine: Callable[[], Engine], name: str, state: DatasetState,
                     events: Sequence[e.MetadataEvent]) -> None:
    """Refuse (``SchemaChangeRefused``) a changed source or query (``events``) of the dataset
    ``name``, whose chain is ``state``, that its records could not keep the schema of."""
    from ..store.verify import vocabulary_of

    if state.schema is None or state.schema.schema is None:
        return  # no data yet (or a pre-RFC-016 schema: the pull compares it)
    v = vocabulary_of(state.vocab)
    system = (v.offset, v.operation_type, v.system_time)
    old = odf_columns(state.schema.schema, system)
    for event in events:
        if isinstance(event, e.SetPollingSource) and event.preprocess is None:
            declared = _declared(event.read)
            if declared is not None:
                added_columns(name, _any_nullability([c for c in old if c.name != v.event_time]),
                              _any_nullability(odf_columns(declared, [v.event_time])),
                              "the new read schema")
        elif isinstance(event, e.SetTransform):
            output = _query_output(ws, engine, name, state, event)
            if output is not None:
                added_columns(name, _any_nullability(old),
                              _any_nullability(odf_columns(output, system)), "the new query")


def _declared(read: object) -> DataSchema | None:
    """The ODF schema of the columns a read step declares, as a slice stores them."""
    from ..data.odf_schema import data_schema
    from ..ingest.schema_ddl import parse_schema

    schema = getattr(read, "schema", None)
    if schema is not None:
        return schema
    ddl = getattr(read, "ddl_schema", None)
    return data_schema(_stored(parse_schema(ddl))) if ddl else None


def _stored(schema: pa.Schema) -> pa.Schema:
    import pyarrow as pa

    from ..data.odf_slice import stored_type

    return pa.schema([f.with_type(stored_type(f.type, f.name, top_level=True)) for f in schema])


def _query_output(ws: Workspace, engine: Callable[[], Engine], name: str, state: DatasetState,
                  event: e.SetTransform) -> DataSchema | None:
    """The schema the query of ``event`` outputs, as stored (None: an input has no data yet)."""
    import pyarrow.parquet as pq

    from ..data.odf_schema import data_schema
    from ..engine.port import EngineError, EngineErrorKind, InputSchema, ValidateRequest
    from ..metadata.objects import DatasetVocabulary, LateRows
    from ..store.checked import checked_current_files
    from ..store.late_rows import late_rows_policy
    from ..store.overview import CurrentDatasets
    from ..store.verify import vocabulary_of
    from .current_derivative import engine_transform

    datasets = CurrentDatasets(ws)
    inputs = []
    systems: dict[str, tuple[str, ...]] = {}  # each input's system columns, by its view name
    for given in event.inputs:
        ds = datasets.input_dataset(given, name)
        input_state = ds.state()
        newest = checked_current_files(ds, input_state.slices[-1:])
        if not newest:
            return None  # nothing to validate against yet; the pull reports errors then
        iv = vocabulary_of(input_state.vocab)
        systems[given.alias or ds.id] = (iv.offset, iv.operation_type, iv.system_time)
        inputs.append(InputSchema(given.alias or ds.id, DatasetVocabulary(
            system_time_column=iv.system_time, event_time_column=iv.event_time),
            pq.read_schema(newest[0])))
    v = vocabulary_of(state.vocab)
    transaction = f"validate-{uuid.uuid4().hex[:12]}"
    try:
        schema = engine().validate(ValidateRequest(
            transaction_id=transaction, dataset_id=name,
            inputs=inputs, transform=engine_transform(event),
            vocab=DatasetVocabulary(system_time_column=v.system_time, event_time_column=v.event_time),
            previous_transform=engine_transform(state.transform) if state.transform else None,
        )).schema
    except EngineError as e:
        # a query Spark cannot stream is computed over the inputs' rows by a derivative that
        # corrects (current_derivative): its output is the batch's, over empty inputs
        if e.kind is not EngineErrorKind.INVALID_QUERY or late_rows_policy(ws, name) is not LateRows.CORRECT:
            raise
        try:
            schema = _batch_output(engine(), transaction, name, inputs, systems, event)
        except EngineError:
            raise e from None
    return data_schema(_stored(schema))


def _batch_output(engine: Engine, transaction: str, name: str, inputs: list[InputSchema],
                  systems: dict[str, tuple[str, ...]], event: e.SetTransform) -> pa.Schema:
    """The schema the query of ``event`` outputs run once as a batch over empty inputs of
    the ``inputs``' schemas, as a recomputed step runs it: a streamed input's rows without its
    ``systems`` columns, a temporal table's versions with them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..engine.port import ExecuteInput, PreprocessRequest
    from .current_derivative import engine_transform

    folder = engine.workdir(transaction)
    folder.mkdir(parents=True, exist_ok=True)
    temporal = {t.name for t in event.transform.temporal_tables or ()}
    given = []
    for k, i in enumerate(inputs):
        path = folder / f"empty-{k}.parquet"
        schema = i.schema
        if i.dataset_id not in temporal:
            schema = pa.schema([f for f in schema if f.name not in systems[i.dataset_id]])
        pq.write_table(schema.empty_table(), path)
        given.append(ExecuteInput(dataset_id=i.dataset_id, vocab=i.vocab, schema=schema, data_paths=[path]))
    output = folder / "output.parquet"
    engine.preprocess(PreprocessRequest(transaction_id=transaction, dataset_id=name, input_path=None,
                                        transform=engine_transform(event), output_path=output,
                                        inputs=given))
    return pq.read_schema(output)


def _any_nullability(columns: list[Column]) -> list[Column]:
    return [dataclasses.replace(c, required=None) for c in columns]
