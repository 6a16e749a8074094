"""A dataset's schema and its history (``coord schema``, the API's ``/schema``): one
implementation for both front ends and both ODF versions.

- ODF 0.39: each ``SetDataSchema`` of the chain is a version (its block's sequence number,
  multihash and system time), the newest one in force; what a version changed is the columns
  it added (``metadata.schema_evolution`` allows nothing else). Read from the metadata only.
- ODF 0.18 records no schema: a read-only view is made from the slices, each checked
  (``trust.slice_check``) and its Parquet footer read; a version starts at each slice whose
  columns differ from the slice before (its block's position in the chain, from 0).
- Before its first data a dataset has no schema: ``versions`` is empty, and a root's read step
  may declare one (``declared``: its DDL lines as written). The reference records nothing at
  ``add`` then either: its first ingest writes the first ``SetDataSchema``.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..metadata.schema_evolution import Column, odf_columns
from ..workspace import Dataset
from ..workspace.config import OdfVersion

if TYPE_CHECKING:
    from ..metadata.odf39.data import DataSchema


@dataclass(frozen=True)
class SchemaVersion:
    sequence_number: int  # the block's (0.18: its position in the chain, from 0)
    block: str  # its hash as the dataset's version writes it (0.39: multihash, 0.18: hex)
    system_time: datetime
    columns: tuple[Column, ...]
    added: tuple[str, ...]  # the columns the version before did not have (the first: all)


@dataclass(frozen=True)
class DatasetSchema:
    dataset: str
    odf: OdfVersion
    versions: tuple[SchemaVersion, ...]  # oldest first; the last is in force
    declared: tuple[str, ...] | None  # a root's read schema as written, when it declares one

    @property
    def in_force(self) -> SchemaVersion | None:
        return self.versions[-1] if self.versions else None


def dataset_schema(ds: Dataset) -> DatasetSchema:
    """The schema versions of ``ds``, oldest first."""
    if ds.ws.odf_of(ds.id) is OdfVersion.V039:
        return _current(ds)
    return _odf18(ds)


def _current(ds: Dataset) -> DatasetSchema:
    from ..metadata.odf39.events import SetDataSchema
    from ..store.dataset import CurrentDataset

    state = CurrentDataset(ds.ws, ds.id).state()
    versions: list[SchemaVersion] = []
    for stored in state.blocks:
        event = stored.block.event
        if not isinstance(event, SetDataSchema):
            continue
        schema = event.schema
        if schema is None and event.raw_arrow_schema is not None:
            schema = _legacy(event.raw_arrow_schema.to_bytes())
        if schema is not None:
            versions.append(_version(stored.block.sequence_number, str(stored.hash),
                                     stored.block.system_time, odf_columns(schema), versions))
    read = state.polling_source.read if state.polling_source is not None else None
    declared = getattr(read, "ddl_schema", None) if read is not None else None
    return DatasetSchema(ds.id, OdfVersion.V039, tuple(versions),
                         tuple(declared) if declared else None)


def _legacy(arrow: bytes) -> DataSchema:
    """The ODF schema of a ``SetDataSchema`` written before RFC-016 (an Arrow IPC schema)."""
    import pyarrow as pa

    from ..data.odf_schema import data_schema

    return data_schema(pa.ipc.read_schema(pa.py_buffer(arrow)))


def _odf18(ds: Dataset) -> DatasetSchema:
    import pyarrow.parquet as pq

    from ..data.odf_schema import arrow_columns
    from ..metadata.objects import DatasetSourceRoot
    from ..trust.slice_check import checked_slices

    blocks = list(ds.blocks())  # newest first
    with_data = [(k, h, b) for k, (h, b) in enumerate(reversed(blocks)) if b.output_slice is not None]
    files = checked_slices(ds, [(h, b) for _, h, b in with_data])
    versions: list[SchemaVersion] = []
    for (k, h, b), path in zip(with_data, files, strict=True):
        columns = arrow_columns(pq.read_schema(path))
        if not versions or list(versions[-1].columns) != columns:
            versions.append(_version(k, h.hex(), b.system_time, columns, versions))
    source = ds.state().source
    declared = source.read.schema if isinstance(source, DatasetSourceRoot) else None
    return DatasetSchema(ds.id, OdfVersion.V018, tuple(versions), tuple(declared) if declared else None)


def _version(n: int, block: str, system_time: datetime, columns: list[Column],
             before: list[SchemaVersion]) -> SchemaVersion:
    known = {c.name for c in before[-1].columns} if before else set()
    return SchemaVersion(n, block, system_time, tuple(columns),
                         tuple(c.name for c in columns if c.name not in known))


def schema_json(answer: DatasetSchema, history: bool) -> dict:
    """The answer as ``coord schema -o json`` and the API show it: the columns in force (None
    before the first data), with ``history`` every version."""
    doc: dict = {"dataset": answer.dataset, "odf": str(answer.odf),
                 "inForce": _version_json(answer.in_force) if answer.in_force else None}
    if answer.declared is not None:
        doc["declaredReadSchema"] = list(answer.declared)
    if history:
        doc["history"] = [_version_json(v) for v in answer.versions]
    return doc


def _version_json(v: SchemaVersion) -> dict:
    from ..metadata.timestamps import format_timestamp

    return {"sequenceNumber": v.sequence_number, "block": v.block,
            "systemTime": format_timestamp(v.system_time), "added": list(v.added),
            "columns": [column_json(c) for c in v.columns]}


def column_json(c: Column) -> dict:
    """A column as the JSON answers show it (``nullable`` null: not recorded, ODF 0.18)."""
    return {"name": c.name, "type": c.text, "nullable": None if c.required is None else not c.required}
